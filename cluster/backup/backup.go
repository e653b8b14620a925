// Package backup is the file format of a cluster backup: a header, one
// section per raft group holding that group's state machine snapshot (the
// bytes fsm.FSM.WriteSnapshot writes), and a trailer. Sections are written
// in chunks as they stream from each group's leader, so neither the node
// taking the backup nor the one serving a group holds a whole group in
// memory; the trailer's SHA-256 covers every byte before it, so a file cut
// short or damaged anywhere is refused.
//
//	"QRBACKUP" | format u16 | header length u32 | header (JSON)
//	section*:  'S' | name length u8 | name | (chunk length u32 | chunk)* | u32 0 | CRC-32C of the data u32
//	trailer:   'E' | section count u32 | SHA-256 of every byte before it
//
// Integers are big-endian. The sections are the data groups "0".."G-1" in
// order, then "meta".
package backup

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"strconv"
)

// Format is the version of the layout this package writes and reads.
const Format = 1

const (
	magic      = "QRBACKUP"
	maxHeader  = 64 << 10
	maxChunk   = 1 << 20
	maxName    = 64
	metaGroup  = "meta"
	maxGroups  = 1024
	sectionTag = 'S'
	endTag     = 'E'
)

// MaxSection bounds one group's snapshot in a backup a reader accepts
// (it holds one section in memory at a time).
const MaxSection = 1 << 31

// ErrDamaged is returned (wrapped) for a file that is not a whole,
// undamaged backup.
var ErrDamaged = errors.New("backup: damaged or incomplete")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header describes a backup.
type Header struct {
	Format          int    `json:"format"`
	CreatedUnixNano int64  `json:"created_unix_nano"`
	Binary          string `json:"binary_version"`
	// ClusterVersion is the cluster's version when the backup began.
	ClusterVersion uint32 `json:"cluster_version"`
	// Groups is the cluster's number of data groups.
	Groups int `json:"groups"`
	// TakenBy is the node that streamed the backup.
	TakenBy string `json:"taken_by"`
}

// Names are the sections of a backup of a cluster with groups data groups,
// in the order they are written.
func Names(groups int) []string {
	names := make([]string, 0, groups+1)
	for i := range groups {
		names = append(names, strconv.Itoa(i))
	}
	return append(names, metaGroup)
}

// Writer writes a backup. Call Section for each of Names(h.Groups) in
// order, closing each, then Close.
type Writer struct {
	dst      io.Writer
	out      io.Writer // dst and sum
	sum      hash.Hash
	names    []string
	sections int
	open     bool
	err      error
}

// NewWriter writes h's header to w.
func NewWriter(w io.Writer, h Header) (*Writer, error) {
	if h.Groups < 1 || h.Groups > maxGroups {
		return nil, fmt.Errorf("backup: %d groups, not 1..%d", h.Groups, maxGroups)
	}
	h.Format = Format
	js, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	bw := &Writer{dst: w, sum: sha256.New(), names: Names(h.Groups)}
	bw.out = io.MultiWriter(w, bw.sum)
	b := append([]byte(magic), 0, 0, 0, 0, 0, 0)
	binary.BigEndian.PutUint16(b[len(magic):], Format)
	binary.BigEndian.PutUint32(b[len(magic)+2:], uint32(len(js)))
	bw.write(append(b, js...))
	return bw, bw.err
}

func (w *Writer) write(b []byte) {
	if w.err == nil {
		_, w.err = w.out.Write(b)
	}
}

// Section starts the next group's section; its data is what is written to
// the returned writer until its Close.
func (w *Writer) Section(group string) (*SectionWriter, error) {
	switch {
	case w.err != nil:
		return nil, w.err
	case w.open:
		return nil, errors.New("backup: a section is still open")
	case w.sections >= len(w.names) || w.names[w.sections] != group:
		return nil, fmt.Errorf("backup: section %q out of order", group)
	}
	w.open = true
	w.write(append([]byte{sectionTag, byte(len(group))}, group...))
	return &SectionWriter{w: w, buf: make([]byte, 4, 4+maxChunk)}, w.err
}

// Close writes the trailer. It fails unless every section was written.
func (w *Writer) Close() error {
	if w.err != nil {
		return w.err
	}
	if w.open || w.sections != len(w.names) {
		return fmt.Errorf("backup: %d of %d sections written", w.sections, len(w.names))
	}
	b := []byte{endTag, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(w.sections))
	w.write(b)
	if w.err == nil {
		_, w.err = w.dst.Write(w.sum.Sum(nil))
	}
	return w.err
}

// SectionWriter writes one section's data in chunks.
type SectionWriter struct {
	w   *Writer
	crc uint32
	buf []byte // 4 bytes of length, then up to maxChunk of data
}

func (s *SectionWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 && s.w.err == nil {
		k := min(len(p), maxChunk+4-len(s.buf))
		s.buf = append(s.buf, p[:k]...)
		p = p[k:]
		if len(s.buf) == maxChunk+4 {
			s.flush()
		}
	}
	return n, s.w.err
}

func (s *SectionWriter) flush() {
	data := s.buf[4:]
	s.crc = crc32.Update(s.crc, castagnoli, data)
	binary.BigEndian.PutUint32(s.buf, uint32(len(data)))
	s.w.write(s.buf)
	s.buf = s.buf[:4]
}

// Close ends the section.
func (s *SectionWriter) Close() error {
	if len(s.buf) > 4 {
		s.flush()
	}
	b := make([]byte, 8)
	binary.BigEndian.PutUint32(b[4:], s.crc)
	s.w.write(b)
	s.w.open = false
	s.w.sections++
	return s.w.err
}

// Write writes a whole backup with header h to w: a section for each of
// Names(h.Groups), in order, whose data each writes (it is given the
// section's group). The first failure ends it, naming the group, and
// leaves w holding an incomplete backup that every reader refuses.
func Write(w io.Writer, h Header, each func(group string, w io.Writer) error) error {
	bw, err := NewWriter(w, h)
	if err != nil {
		return err
	}
	for _, group := range Names(h.Groups) {
		sw, err := bw.Section(group)
		if err != nil {
			return err
		}
		if err := each(group, sw); err != nil {
			return fmt.Errorf("backup of group %s: %w", group, err)
		}
		if err := sw.Close(); err != nil {
			return err
		}
	}
	return bw.Close()
}

// Section is one group's snapshot read from a backup.
type Section struct {
	Group string
	Data  []byte
}

// Read reads a whole backup from r, calling each for every section in
// order (each may keep Data), and checks the trailer. Nothing each saw is
// known to be whole until Read returns nil: a caller writes nothing
// durable before then. An error from each ends the read and is returned.
func Read(r io.Reader, each func(Header, Section) error) (Header, error) {
	rd := &reader{r: bufio.NewReaderSize(r, 1<<16), sum: sha256.New()}
	h, err := rd.header()
	if err != nil {
		return h, err
	}
	for _, name := range Names(h.Groups) {
		s, err := rd.section(name)
		if err != nil {
			return h, err
		}
		if each != nil {
			if err := each(h, s); err != nil {
				return h, err
			}
		}
	}
	return h, rd.trailer(len(Names(h.Groups)))
}

type reader struct {
	r   *bufio.Reader
	sum hash.Hash
	off int64
}

func damaged(off int64, format string, args ...any) error {
	return fmt.Errorf("%w: at byte %d: %s", ErrDamaged, off, fmt.Sprintf(format, args...))
}

// full reads exactly len(b) bytes into the hash too.
func (rd *reader) full(b []byte, what string) error {
	n, err := io.ReadFull(rd.r, b)
	rd.sum.Write(b[:n])
	rd.off += int64(n)
	if err != nil {
		return damaged(rd.off, "%s: the file ends early (%v)", what, err)
	}
	return nil
}

func (rd *reader) header() (Header, error) {
	var h Header
	b := make([]byte, len(magic)+6)
	if err := rd.full(b, "header"); err != nil {
		return h, err
	}
	if string(b[:len(magic)]) != magic {
		return h, fmt.Errorf("%w: not a quorate backup (no %q at its start)", ErrDamaged, magic)
	}
	if f := binary.BigEndian.Uint16(b[len(magic):]); f != Format {
		return h, fmt.Errorf("backup: format %d; this quorate reads format %d (a newer quorate wrote it?)", f, Format)
	}
	n := binary.BigEndian.Uint32(b[len(magic)+2:])
	if n > maxHeader {
		return h, damaged(rd.off, "a header of %d bytes", n)
	}
	js := make([]byte, n)
	if err := rd.full(js, "header"); err != nil {
		return h, err
	}
	if err := json.Unmarshal(js, &h); err != nil {
		return h, damaged(rd.off, "header: %v", err)
	}
	if h.Groups < 1 || h.Groups > maxGroups {
		return h, damaged(rd.off, "header: %d groups, not 1..%d", h.Groups, maxGroups)
	}
	return h, nil
}

func (rd *reader) section(want string) (Section, error) {
	b := make([]byte, 2)
	if err := rd.full(b, "section "+want); err != nil {
		return Section{}, err
	}
	if b[0] != sectionTag || b[1] == 0 || b[1] > maxName {
		return Section{}, damaged(rd.off, "expected section %q", want)
	}
	name := make([]byte, b[1])
	if err := rd.full(name, "section "+want); err != nil {
		return Section{}, err
	}
	if string(name) != want {
		return Section{}, damaged(rd.off, "section %q where %q belongs", name, want)
	}
	s := Section{Group: want}
	var crc uint32
	n4 := make([]byte, 4)
	for {
		if err := rd.full(n4, "section "+want); err != nil {
			return s, err
		}
		n := binary.BigEndian.Uint32(n4)
		if n == 0 {
			break
		}
		if n > maxChunk || int64(len(s.Data))+int64(n) > MaxSection {
			return s, damaged(rd.off, "section %q: a chunk of %d bytes", want, n)
		}
		start := len(s.Data)
		s.Data = append(s.Data, make([]byte, n)...)
		if err := rd.full(s.Data[start:], "section "+want); err != nil {
			return s, err
		}
		crc = crc32.Update(crc, castagnoli, s.Data[start:])
	}
	if err := rd.full(n4, "section "+want); err != nil {
		return s, err
	}
	if binary.BigEndian.Uint32(n4) != crc {
		return s, damaged(rd.off, "section %q: checksum mismatch", want)
	}
	return s, nil
}

func (rd *reader) trailer(sections int) error {
	b := make([]byte, 5)
	if err := rd.full(b, "trailer"); err != nil {
		return err
	}
	if b[0] != endTag || binary.BigEndian.Uint32(b[1:]) != uint32(sections) {
		return damaged(rd.off, "no trailer for %d sections", sections)
	}
	want := rd.sum.Sum(nil)
	got := make([]byte, len(want))
	if _, err := io.ReadFull(rd.r, got); err != nil {
		return damaged(rd.off, "trailer: the file ends early (%v)", err)
	}
	if string(got) != string(want) {
		return damaged(rd.off, "SHA-256 mismatch")
	}
	if _, err := rd.r.ReadByte(); err != io.EOF {
		return damaged(rd.off+int64(len(got)), "bytes after the trailer")
	}
	return nil
}
