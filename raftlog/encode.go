package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// logFormat is the first byte of every encoded log entry; a decoder that
// meets another refuses the entry rather than guess.
const logFormat = 1

// errCorrupt reports a stored entry that does not decode. Pebble checksums
// what it stores, so this means a bug or a foreign database, never a torn
// write.
var errCorrupt = errors.New("raftlog: corrupt log entry")

// appendLog appends the encoding of l to dst:
//
//	format byte | uvarint term | type byte | varint appended-at (unix ns, 0 = zero time)
//	| uvarint len | data | uvarint len | extensions
//
// The index is in the key, not the value.
func appendLog(dst []byte, l *raft.Log) []byte {
	dst = append(dst, logFormat)
	dst = binary.AppendUvarint(dst, l.Term)
	dst = append(dst, byte(l.Type))
	var at int64
	if !l.AppendedAt.IsZero() {
		at = l.AppendedAt.UnixNano()
	}
	dst = binary.AppendVarint(dst, at)
	dst = binary.AppendUvarint(dst, uint64(len(l.Data)))
	dst = append(dst, l.Data...)
	dst = binary.AppendUvarint(dst, uint64(len(l.Extensions)))
	return append(dst, l.Extensions...)
}

// decodeLog fills l from b (which it does not retain) and index.
func decodeLog(index uint64, b []byte, l *raft.Log) error {
	if len(b) == 0 || b[0] != logFormat {
		return fmt.Errorf("%w: index %d: unknown format", errCorrupt, index)
	}
	b = b[1:]
	term, n := binary.Uvarint(b)
	if n <= 0 || len(b) < n+1 {
		return fmt.Errorf("%w: index %d: term", errCorrupt, index)
	}
	typ := raft.LogType(b[n])
	b = b[n+1:]
	at, n := binary.Varint(b)
	if n <= 0 {
		return fmt.Errorf("%w: index %d: time", errCorrupt, index)
	}
	b = b[n:]
	data, b, ok := bytesField(b)
	if !ok {
		return fmt.Errorf("%w: index %d: data", errCorrupt, index)
	}
	ext, b, ok := bytesField(b)
	if !ok || len(b) != 0 {
		return fmt.Errorf("%w: index %d: extensions", errCorrupt, index)
	}
	*l = raft.Log{Index: index, Term: term, Type: typ, Data: data, Extensions: ext}
	if at != 0 {
		l.AppendedAt = time.Unix(0, at)
	}
	return nil
}

// bytesField reads a uvarint length and that many bytes, copied (nil when
// empty), and returns the rest.
func bytesField(b []byte) (field, rest []byte, ok bool) {
	size, n := binary.Uvarint(b)
	if n <= 0 || uint64(len(b)-n) < size {
		return nil, nil, false
	}
	b = b[n:]
	if size > 0 {
		field = append([]byte(nil), b[:size]...)
	}
	return field, b[size:], true
}
