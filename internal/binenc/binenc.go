// Package binenc holds the primitives of quorate's binary encodings: the
// log's commands and snapshots (fsm) and the internal RPC's forwarded
// decisions (cluster). Integers are varints, strings are a uvarint length
// and the bytes.
package binenc

import (
	"encoding/binary"
	"fmt"
)

// AppendString appends s as its length and its bytes.
func AppendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// AppendBytes appends v as its length and its bytes. A nil and an empty
// slice encode alike; [Reader.Bytes] returns nil for both.
func AppendBytes(b []byte, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// AppendBool appends v as one byte, 0 or 1.
func AppendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// Reader decodes primitives from B, remembering the first error in Err;
// after an error every read returns a zero value. It never panics and never
// allocates more than the bytes it was given can justify.
type Reader struct {
	B   []byte
	Err error
}

// Fail records an error, unless one is recorded already.
func (r *Reader) Fail(format string, args ...any) {
	if r.Err == nil {
		r.Err = fmt.Errorf(format, args...)
	}
}

// Byte reads one byte.
func (r *Reader) Byte() byte {
	if r.Err != nil {
		return 0
	}
	if len(r.B) < 1 {
		r.Fail("truncated")
		return 0
	}
	v := r.B[0]
	r.B = r.B[1:]
	return v
}

// Bool reads a byte written by AppendBool; any other value is an error.
func (r *Reader) Bool() bool {
	switch v := r.Byte(); v {
	case 0, 1:
		return v == 1
	default:
		r.Fail("boolean byte %#x", v)
		return false
	}
}

// Uvarint reads an unsigned varint.
func (r *Reader) Uvarint() uint64 {
	if r.Err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.B)
	if n <= 0 {
		r.Fail("bad uvarint")
		return 0
	}
	r.B = r.B[n:]
	return v
}

// Varint reads a signed varint.
func (r *Reader) Varint() int64 {
	if r.Err != nil {
		return 0
	}
	v, n := binary.Varint(r.B)
	if n <= 0 {
		r.Fail("bad varint")
		return 0
	}
	r.B = r.B[n:]
	return v
}

// Str reads a string of at most max bytes.
func (r *Reader) Str(max int) string {
	n := r.Uvarint()
	if r.Err != nil {
		return ""
	}
	if n > uint64(max) {
		r.Fail("string of %d bytes, at most %d allowed", n, max)
		return ""
	}
	if n > uint64(len(r.B)) {
		r.Fail("truncated string")
		return ""
	}
	s := string(r.B[:n])
	r.B = r.B[n:]
	return s
}

// Fixed reads the next n bytes, which have no length before them.
func (r *Reader) Fixed(n int) []byte {
	if r.Err != nil {
		return nil
	}
	if n > len(r.B) {
		r.Fail("truncated: %d bytes left, %d wanted", len(r.B), n)
		return nil
	}
	v := r.B[:n:n]
	r.B = r.B[n:]
	return v
}

// Bytes reads a byte string of at most max bytes into a new slice (nil if
// it is empty), so the result does not alias the reader's buffer.
func (r *Reader) Bytes(max int) []byte {
	n := r.Uvarint()
	if r.Err != nil {
		return nil
	}
	if n > uint64(max) {
		r.Fail("byte string of %d bytes, at most %d allowed", n, max)
		return nil
	}
	if n > uint64(len(r.B)) {
		r.Fail("truncated byte string")
		return nil
	}
	if n == 0 {
		return nil
	}
	v := make([]byte, n)
	copy(v, r.B)
	r.B = r.B[n:]
	return v
}

// End reports the first error, or one for bytes left after what was read:
// a message must be read to its last byte.
func (r *Reader) End() error {
	if r.Err == nil && len(r.B) > 0 {
		r.Fail("%d bytes after the end", len(r.B))
	}
	return r.Err
}

// Count reads an element count and checks that it could fit in the bytes
// left, each element taking at least minSize bytes, so a caller may
// allocate for it.
func (r *Reader) Count(minSize int) uint64 {
	n := r.Uvarint()
	if r.Err == nil && n > uint64(len(r.B)/minSize) {
		r.Fail("%d elements in %d bytes", n, len(r.B))
		return 0
	}
	return n
}
