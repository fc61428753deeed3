package record

import "slices"

// Grow makes room for n more bytes of encoded records, so that a builder
// about to be filled (a producer's batch after a full one) does not grow
// its buffer step by step, copying it each time.
func (b *Builder) Grow(n int) { b.recs = slices.Grow(b.recs, n) }
