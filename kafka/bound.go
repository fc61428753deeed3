package kafka

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
)

// Bounded decoding. A request's body is decoded by kmsg's generated
// readers, which allocate each array before reading its elements: an
// array of n elements costs n times the size of the element's Go struct
// (tens of bytes) though each may take as little as one byte on the wire.
// So before a body reaches kmsg, scanBody walks it with the layout of its
// API and version (schemas, below), reading every length as kmsg will,
// and refuses it, closing the connection as for any request that does not
// parse, when
//
//   - a string, bytes or tagged field is longer than the bytes left, or an
//     array has more elements than the bytes left could hold at the
//     smallest size of its element;
//   - its arrays hold more than maxRequestElements elements in all;
//   - or what kmsg would allocate for it (every array at its Go size,
//     every string copied, tagged fields at a generous price) is more than
//     decodeFactor times its size plus decodeSlack.
//
// A request that passes is decoded in at most decodeFactor bytes per byte
// of it (plus decodeSlack), whatever its shape; the fuzz target
// FuzzKafkaDecodeAlloc holds the decoder to that bound with the measured
// allocations. Real requests cost far less: a produce's records are not
// copied (they alias the body), and a partition of a fetch or a commit
// decodes into about twice its wire size; only degenerate shapes (a
// thousand empty group names) come near the bound.
const (
	// decodeFactor is k: a request decodes into at most k bytes per byte
	// of it, plus decodeSlack.
	decodeFactor = 8
	// decodeSlack is the constant part of the bound, the allowance of a
	// small request (a metadata request for one short topic name costs
	// more than 8 times its few bytes).
	decodeSlack = 64 << 10
	// maxRequestElements caps the array elements of one request, all its
	// arrays together (topics, partitions, groups, members...): 131,072,
	// six times the 20,000 partitions a node is meant to host, so a
	// request naming every partition of a node passes, while our own
	// handling of each element (a few hundred bytes) stays bounded.
	maxRequestElements = 1 << 17
	// tagCost is the price of one tagged field beyond its bytes: kmsg
	// keeps an unknown one in a map, and a known one may hold tags of its
	// own, each priced tagByteCost per byte.
	tagCost     = 256
	tagByteCost = 64
)

// kind is a field's wire type.
type kind uint8

const (
	kInt8       kind = iota // int8, bool
	kInt16                  //
	kInt32                  //
	kInt64                  //
	kUUID                   // 16 bytes
	kString                 // copied
	kNullString             // copied, behind a pointer
	kBytes                  // nullable or not; kmsg aliases the body
	kArray                  // of the elem struct
	kStrings                // array of strings
	kInt32s                 // array of int32
	kInt64s                 // array of int64
	kInt8s                  // array of int8
)

// field is one field of a struct, present in versions from..to.
type field struct {
	kind     kind
	from, to int16
	elem     *schema // kArray
}

// schema is a struct's layout; size is its Go size, what kmsg allocates
// per element of an array of it.
type schema struct {
	size   int
	fields []field
}

// since is the field present from version v on.
func (f field) since(v int16) field { f.from = v; return f }

// in is the field present in versions from to to.
func (f field) in(from, to int16) field {
	f.from, f.to = from, to
	return f
}

func fld(k kind) field { return field{kind: k, to: math.MaxInt16} }

func arr(s *schema) field { return field{kind: kArray, to: math.MaxInt16, elem: s} }

func strct[T any](fields ...field) *schema {
	return &schema{size: int(reflect.TypeFor[T]().Size()), fields: fields}
}

// minSize is the fewest bytes an element of s takes on the wire at
// version v.
func (s *schema) minSize(v int16, flexible bool) int {
	n := 0
	if flexible {
		n++ // the tags' count
	}
	for _, f := range s.fields {
		if v < f.from || v > f.to {
			continue
		}
		n += minFieldSize(f.kind, flexible)
	}
	return n
}

func minFieldSize(k kind, flexible bool) int {
	switch k {
	case kInt8:
		return 1
	case kInt16:
		return 2
	case kInt32:
		return 4
	case kInt64:
		return 8
	case kUUID:
		return 16
	case kString, kNullString:
		if flexible {
			return 1
		}
		return 2
	}
	// Bytes and arrays: a 4-byte length, or one varint byte.
	if flexible {
		return 1
	}
	return 4
}

// scanner walks a body by its schema, totting up what decoding it costs.
type scanner struct {
	b        []byte
	v        int16
	flexible bool
	cost     int // bytes kmsg allocates
	elements int // array elements in all
	err      error
}

func (s *scanner) fail(format string, args ...any) {
	if s.err == nil {
		s.err = fmt.Errorf(format, args...)
		s.b = nil
	}
}

func (s *scanner) skip(n int) {
	if s.err != nil {
		return
	}
	if n > len(s.b) {
		s.fail("%d bytes needed, %d left", n, len(s.b))
		return
	}
	s.b = s.b[n:]
}

// uvarint reads an unsigned varint of at most 32 bits.
func (s *scanner) uvarint() int64 {
	if s.err != nil {
		return 0
	}
	u, n := binary.Uvarint(s.b)
	if n <= 0 || u > math.MaxUint32 {
		s.fail("bad varint")
		return 0
	}
	s.b = s.b[n:]
	return int64(u)
}

func (s *scanner) int16() int64 {
	if s.err != nil || len(s.b) < 2 {
		s.skip(2)
		return 0
	}
	v := int16(binary.BigEndian.Uint16(s.b))
	s.b = s.b[2:]
	return int64(v)
}

func (s *scanner) int32() int64 {
	if s.err != nil || len(s.b) < 4 {
		s.skip(4)
		return 0
	}
	v := int32(binary.BigEndian.Uint32(s.b))
	s.b = s.b[4:]
	return int64(v)
}

// length reads a string's (16 bits), or bytes' or an array's (32 bits)
// length, compact (an unsigned varint, one more than the length) in the
// flexible versions; -1 is null.
func (s *scanner) length(short bool) int64 {
	switch {
	case s.flexible:
		return s.uvarint() - 1
	case short:
		return s.int16()
	}
	return s.int32()
}

// alloc is the cost of one allocation of n bytes, with the rounding up
// to the allocator's size classes.
func alloc(n int) int {
	if n <= 0 {
		return 0
	}
	return n + n/4 + 16
}

// str skips a string, copied when decoded.
func (s *scanner) str(pointer bool) {
	n := s.length(true)
	if n < 0 {
		return // null; a non-nullable one is refused by the decoder
	}
	if n > int64(len(s.b)) {
		s.fail("string of %d bytes, %d left", n, len(s.b))
		return
	}
	s.b = s.b[n:]
	s.cost += alloc(int(n))
	if pointer {
		s.cost += 16
	}
}

// array reads an array's length and bounds it by the bytes left, at
// minSize bytes an element, and by what the request may hold; it
// charges elemSize bytes an element. A null array has 0 elements.
func (s *scanner) array(minSize, elemSize int) int {
	n := s.length(false)
	if s.err != nil || n <= 0 {
		return 0
	}
	switch {
	case n*int64(max(minSize, 1)) > int64(len(s.b)):
		s.fail("array of %d elements of at least %d bytes, %d bytes left", n, minSize, len(s.b))
		return 0
	case int64(s.elements)+n > maxRequestElements:
		s.fail("more than %d array elements in one request", maxRequestElements)
		return 0
	}
	s.elements += int(n)
	s.cost += alloc(int(n) * elemSize)
	return int(n)
}

// tags skips a tagged-field section.
func (s *scanner) tags() {
	count := s.uvarint()
	if count > int64(len(s.b))/2 {
		s.fail("%d tagged fields, %d bytes left", count, len(s.b))
		return
	}
	for range count {
		s.uvarint() // the tag
		size := s.uvarint()
		if s.err != nil {
			return
		}
		if size > int64(len(s.b)) {
			s.fail("tagged field of %d bytes, %d left", size, len(s.b))
			return
		}
		s.b = s.b[size:]
		s.cost += tagCost + tagByteCost*int(size)
	}
}

// walk skips one struct of schema sc.
func (s *scanner) walk(sc *schema) {
	for _, f := range sc.fields {
		if s.err != nil {
			return
		}
		if s.v < f.from || s.v > f.to {
			continue
		}
		switch f.kind {
		case kInt8, kInt16, kInt32, kInt64, kUUID:
			s.skip(minFieldSize(f.kind, false))
		case kString, kNullString:
			s.str(f.kind == kNullString)
		case kBytes:
			n := s.length(false)
			if n > int64(len(s.b)) {
				s.fail("bytes of %d, %d left", n, len(s.b))
			} else if n > 0 {
				s.b = s.b[n:]
			}
		case kStrings:
			for range s.array(minFieldSize(kString, s.flexible), 16) {
				s.str(false)
			}
		case kInt32s:
			s.skip(4 * s.array(4, 4))
		case kInt64s:
			s.skip(8 * s.array(8, 8))
		case kInt8s:
			s.skip(s.array(1, 1))
		case kArray:
			for range s.array(f.elem.minSize(s.v, s.flexible), f.elem.size) {
				s.walk(f.elem)
			}
		}
	}
	if s.flexible {
		s.tags()
	}
}

// scanBody checks a request body of API key at version before it is
// decoded, as the package doc says; it returns what decoding it will
// cost, or why it is refused.
func scanBody(key, version int16, body []byte) (int, error) {
	a, ok := schemas[key]
	if !ok {
		return 0, fmt.Errorf("%w: no layout for api key %d", ErrUnsupported, key)
	}
	s := scanner{b: body, v: version, flexible: version >= a.flexibleFrom}
	s.walk(a.body)
	switch {
	case s.err != nil:
		return 0, s.err
	case s.cost > decodeSlack+decodeFactor*len(body):
		return 0, fmt.Errorf("request of %d bytes would decode into %d, more than %d + %d per byte",
			len(body), s.cost, decodeSlack, decodeFactor)
	}
	return s.cost, nil
}
