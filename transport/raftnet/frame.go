package raftnet

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/quorate/quorate/internal/binenc"
)

// kind is a request frame's type.
type kind byte

const (
	kindAppendEntries  kind = 1
	kindHeartbeat      kind = 2
	kindRequestVote    kind = 3
	kindRequestPreVote kind = 4
	kindTimeoutNow     kind = 5
	kindCall           kind = 6
)

func (k kind) String() string {
	switch k {
	case kindAppendEntries:
		return "append-entries"
	case kindHeartbeat:
		return "heartbeat"
	case kindRequestVote:
		return "request-vote"
	case kindRequestPreVote:
		return "request-pre-vote"
	case kindTimeoutNow:
		return "timeout-now"
	case kindCall:
		return "call"
	}
	return fmt.Sprintf("kind-%d", byte(k))
}

// Stream preamble: magic, version, type.
const (
	magic           = "QRN"
	version    byte = 1
	streamMux       = 'M'
	streamSnap      = 'S'
)

const (
	statusOK    byte = 0
	statusError byte = 1
)

// maxName bounds a group or method name in a frame.
const maxName = 255

// preamble returns the bytes that open a stream of type t.
func preamble(t byte) []byte { return []byte{magic[0], magic[1], magic[2], version, t} }

// readPreamble reads a stream's opening bytes and returns its type.
func readPreamble(r io.Reader) (byte, error) {
	var p [5]byte
	if _, err := io.ReadFull(r, p[:]); err != nil {
		return 0, err
	}
	if string(p[:3]) != magic {
		return 0, fmt.Errorf("raftnet: bad magic %q", p[:3])
	}
	if p[3] != version {
		return 0, fmt.Errorf("raftnet: protocol version %d, this node speaks %d", p[3], version)
	}
	if p[4] != streamMux && p[4] != streamSnap {
		return 0, fmt.Errorf("raftnet: unknown stream type %q", p[4])
	}
	return p[4], nil
}

// request is a decoded request frame.
type request struct {
	kind     kind
	seq      uint64
	group    string
	deadline time.Time // zero: none
	body     []byte
}

// beginRequest starts a request frame in b (reusing its storage): the
// length is patched by endFrame once the body is appended.
func beginRequest(b []byte, k kind, seq uint64, group string, deadline time.Time) []byte {
	b = append(b[:0], 0, 0, 0, 0, byte(k))
	b = binary.AppendUvarint(b, seq)
	b = binenc.AppendString(b, group)
	var d int64
	if !deadline.IsZero() {
		d = deadline.UnixNano()
	}
	return binary.AppendVarint(b, d)
}

// beginResponse starts a response frame in b.
func beginResponse(b []byte, seq uint64, status byte) []byte {
	b = append(b[:0], 0, 0, 0, 0)
	b = binary.AppendUvarint(b, seq)
	return append(b, status)
}

// endFrame writes the frame's length into its first four bytes.
func endFrame(b []byte) []byte {
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// errorResponse is a whole response frame carrying err's text.
func errorResponse(seq uint64, err error) []byte {
	b := beginResponse(nil, seq, statusError)
	return endFrame(append(b, err.Error()...))
}

var errFrameTooLarge = errors.New("raftnet: frame too large")

// readFrame reads one frame's bytes after its length into buf (grown as
// needed) and returns them.
func readFrame(r *bufio.Reader, buf []byte, max int) ([]byte, error) {
	var l [4]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		return buf, err
	}
	n := int(binary.BigEndian.Uint32(l[:]))
	if n > max {
		return buf, fmt.Errorf("%w: %d bytes, at most %d", errFrameTooLarge, n, max)
	}
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	_, err := io.ReadFull(r, buf)
	return buf, err
}

// parseRequest decodes a request frame's fields; body aliases b. On an
// error after the sequence number, the request returned carries it (seq
// numbers start at 1), so the request can be refused alone.
func parseRequest(b []byte) (request, error) {
	r := &binenc.Reader{B: b}
	q := request{kind: kind(r.Byte()), seq: r.Uvarint()}
	if r.Err != nil {
		return request{}, fmt.Errorf("raftnet: request frame: %w", r.Err)
	}
	q.group = r.Str(maxName)
	if d := r.Varint(); d != 0 {
		q.deadline = time.Unix(0, d)
	}
	if r.Err != nil {
		return q, fmt.Errorf("raftnet: request frame: %w", r.Err)
	}
	q.body = r.B
	return q, nil
}

// parseResponse decodes a response frame's fields; body aliases b.
func parseResponse(b []byte) (seq uint64, status byte, body []byte, err error) {
	r := &binenc.Reader{B: b}
	seq, status = r.Uvarint(), r.Byte()
	if r.Err != nil {
		return 0, 0, nil, fmt.Errorf("raftnet: response frame: %w", r.Err)
	}
	if status != statusOK && status != statusError {
		return 0, 0, nil, fmt.Errorf("raftnet: response status %d", status)
	}
	return seq, status, r.B, nil
}
