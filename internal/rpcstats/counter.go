package rpcstats

import "sync/atomic"

type atomicCounter struct{ n atomic.Uint64 }

func (c *atomicCounter) add(d uint64) { c.n.Add(d) }
func (c *atomicCounter) load() uint64 { return c.n.Load() }
