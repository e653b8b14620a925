package raftnet

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/quorate/quorate/internal/binenc"
)

// The raft RPCs are written field by field, in declaration order, with the
// binenc primitives: unsigned integers as uvarints, byte strings as a
// length and the bytes, booleans as one byte. codec_test.go fills every
// field of every message by reflection and checks the round trip, so a raft
// upgrade that adds a field fails the tests instead of silently dropping it.

// maxField bounds one byte string inside a message (a log entry's data, a
// configuration): the frame limit bounds the message as a whole.
const maxField = 64 << 20

func appendHeader(b []byte, h raft.RPCHeader) []byte {
	b = binary.AppendUvarint(b, uint64(h.ProtocolVersion))
	b = binenc.AppendBytes(b, h.ID)
	return binenc.AppendBytes(b, h.Addr)
}

func readHeader(r *binenc.Reader) raft.RPCHeader {
	return raft.RPCHeader{
		ProtocolVersion: raft.ProtocolVersion(r.Uvarint()),
		ID:              r.Bytes(maxField),
		Addr:            r.Bytes(maxField),
	}
}

func appendLog(b []byte, l *raft.Log) []byte {
	b = binary.AppendUvarint(b, l.Index)
	b = binary.AppendUvarint(b, l.Term)
	b = append(b, byte(l.Type))
	b = binenc.AppendBytes(b, l.Data)
	b = binenc.AppendBytes(b, l.Extensions)
	return appendTime(b, l.AppendedAt)
}

func readLog(r *binenc.Reader) *raft.Log {
	return &raft.Log{
		Index:      r.Uvarint(),
		Term:       r.Uvarint(),
		Type:       raft.LogType(r.Byte()),
		Data:       r.Bytes(maxField),
		Extensions: r.Bytes(maxField),
		AppendedAt: readTime(r),
	}
}

// appendTime writes a flag byte (0: the zero time) and the Unix nanoseconds.
func appendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, 0)
	}
	b = append(b, 1)
	return binary.AppendVarint(b, t.UnixNano())
}

func readTime(r *binenc.Reader) time.Time {
	if !r.Bool() {
		return time.Time{}
	}
	return time.Unix(0, r.Varint())
}

func appendAppendEntriesRequest(b []byte, m *raft.AppendEntriesRequest) []byte {
	b = appendHeader(b, m.RPCHeader)
	b = binary.AppendUvarint(b, m.Term)
	//lint:ignore SA1019 raft v1.8.0 still fills the deprecated field; a transport must carry every field
	b = binenc.AppendBytes(b, m.Leader)
	b = binary.AppendUvarint(b, m.PrevLogEntry)
	b = binary.AppendUvarint(b, m.PrevLogTerm)
	b = binary.AppendUvarint(b, uint64(len(m.Entries)))
	for _, l := range m.Entries {
		b = appendLog(b, l)
	}
	return binary.AppendUvarint(b, m.LeaderCommitIndex)
}

func readAppendEntriesRequest(r *binenc.Reader) *raft.AppendEntriesRequest {
	m := &raft.AppendEntriesRequest{
		RPCHeader: readHeader(r),
		Term:      r.Uvarint(),
		//lint:ignore SA1019 raft v1.8.0 still fills the deprecated field; a transport must carry every field
		Leader:       r.Bytes(maxField),
		PrevLogEntry: r.Uvarint(),
		PrevLogTerm:  r.Uvarint(),
	}
	// An entry takes at least 6 bytes: index, term, type, two lengths, time flag.
	if n := r.Count(6); n > 0 {
		m.Entries = make([]*raft.Log, 0, n)
		for range n {
			m.Entries = append(m.Entries, readLog(r))
		}
	}
	m.LeaderCommitIndex = r.Uvarint()
	return m
}

func appendAppendEntriesResponse(b []byte, m *raft.AppendEntriesResponse) []byte {
	b = appendHeader(b, m.RPCHeader)
	b = binary.AppendUvarint(b, m.Term)
	b = binary.AppendUvarint(b, m.LastLog)
	b = binenc.AppendBool(b, m.Success)
	return binenc.AppendBool(b, m.NoRetryBackoff)
}

func readAppendEntriesResponse(r *binenc.Reader, m *raft.AppendEntriesResponse) {
	*m = raft.AppendEntriesResponse{
		RPCHeader:      readHeader(r),
		Term:           r.Uvarint(),
		LastLog:        r.Uvarint(),
		Success:        r.Bool(),
		NoRetryBackoff: r.Bool(),
	}
}

func appendRequestVoteRequest(b []byte, m *raft.RequestVoteRequest) []byte {
	b = appendHeader(b, m.RPCHeader)
	b = binary.AppendUvarint(b, m.Term)
	//lint:ignore SA1019 raft v1.8.0 still fills the deprecated field; a transport must carry every field
	b = binenc.AppendBytes(b, m.Candidate)
	b = binary.AppendUvarint(b, m.LastLogIndex)
	b = binary.AppendUvarint(b, m.LastLogTerm)
	return binenc.AppendBool(b, m.LeadershipTransfer)
}

func readRequestVoteRequest(r *binenc.Reader) *raft.RequestVoteRequest {
	return &raft.RequestVoteRequest{
		RPCHeader: readHeader(r),
		Term:      r.Uvarint(),
		//lint:ignore SA1019 raft v1.8.0 still fills the deprecated field; a transport must carry every field
		Candidate:          r.Bytes(maxField),
		LastLogIndex:       r.Uvarint(),
		LastLogTerm:        r.Uvarint(),
		LeadershipTransfer: r.Bool(),
	}
}

func appendRequestVoteResponse(b []byte, m *raft.RequestVoteResponse) []byte {
	b = appendHeader(b, m.RPCHeader)
	b = binary.AppendUvarint(b, m.Term)
	b = binenc.AppendBytes(b, m.Peers)
	return binenc.AppendBool(b, m.Granted)
}

func readRequestVoteResponse(r *binenc.Reader, m *raft.RequestVoteResponse) {
	*m = raft.RequestVoteResponse{
		RPCHeader: readHeader(r),
		Term:      r.Uvarint(),
		Peers:     r.Bytes(maxField),
		Granted:   r.Bool(),
	}
}

func appendRequestPreVoteRequest(b []byte, m *raft.RequestPreVoteRequest) []byte {
	b = appendHeader(b, m.RPCHeader)
	b = binary.AppendUvarint(b, m.Term)
	b = binary.AppendUvarint(b, m.LastLogIndex)
	return binary.AppendUvarint(b, m.LastLogTerm)
}

func readRequestPreVoteRequest(r *binenc.Reader) *raft.RequestPreVoteRequest {
	return &raft.RequestPreVoteRequest{
		RPCHeader:    readHeader(r),
		Term:         r.Uvarint(),
		LastLogIndex: r.Uvarint(),
		LastLogTerm:  r.Uvarint(),
	}
}

func appendRequestPreVoteResponse(b []byte, m *raft.RequestPreVoteResponse) []byte {
	b = appendHeader(b, m.RPCHeader)
	b = binary.AppendUvarint(b, m.Term)
	return binenc.AppendBool(b, m.Granted)
}

func readRequestPreVoteResponse(r *binenc.Reader, m *raft.RequestPreVoteResponse) {
	*m = raft.RequestPreVoteResponse{
		RPCHeader: readHeader(r),
		Term:      r.Uvarint(),
		Granted:   r.Bool(),
	}
}

func appendInstallSnapshotRequest(b []byte, m *raft.InstallSnapshotRequest) []byte {
	b = appendHeader(b, m.RPCHeader)
	b = binary.AppendUvarint(b, uint64(m.SnapshotVersion))
	b = binary.AppendUvarint(b, m.Term)
	b = binenc.AppendBytes(b, m.Leader)
	b = binary.AppendUvarint(b, m.LastLogIndex)
	b = binary.AppendUvarint(b, m.LastLogTerm)
	b = binenc.AppendBytes(b, m.Peers)
	b = binenc.AppendBytes(b, m.Configuration)
	b = binary.AppendUvarint(b, m.ConfigurationIndex)
	return binary.AppendVarint(b, m.Size)
}

func readInstallSnapshotRequest(r *binenc.Reader) *raft.InstallSnapshotRequest {
	m := &raft.InstallSnapshotRequest{
		RPCHeader:          readHeader(r),
		SnapshotVersion:    raft.SnapshotVersion(r.Uvarint()),
		Term:               r.Uvarint(),
		Leader:             r.Bytes(maxField),
		LastLogIndex:       r.Uvarint(),
		LastLogTerm:        r.Uvarint(),
		Peers:              r.Bytes(maxField),
		Configuration:      r.Bytes(maxField),
		ConfigurationIndex: r.Uvarint(),
		Size:               r.Varint(),
	}
	if r.Err == nil && m.Size < 0 {
		r.Fail("snapshot size %d", m.Size)
	}
	return m
}

func appendInstallSnapshotResponse(b []byte, m *raft.InstallSnapshotResponse) []byte {
	b = appendHeader(b, m.RPCHeader)
	b = binary.AppendUvarint(b, m.Term)
	return binenc.AppendBool(b, m.Success)
}

func readInstallSnapshotResponse(r *binenc.Reader, m *raft.InstallSnapshotResponse) {
	*m = raft.InstallSnapshotResponse{
		RPCHeader: readHeader(r),
		Term:      r.Uvarint(),
		Success:   r.Bool(),
	}
}

func appendTimeoutNowRequest(b []byte, m *raft.TimeoutNowRequest) []byte {
	return appendHeader(b, m.RPCHeader)
}

func readTimeoutNowRequest(r *binenc.Reader) *raft.TimeoutNowRequest {
	return &raft.TimeoutNowRequest{RPCHeader: readHeader(r)}
}

func appendTimeoutNowResponse(b []byte, m *raft.TimeoutNowResponse) []byte {
	return appendHeader(b, m.RPCHeader)
}

func readTimeoutNowResponse(r *binenc.Reader, m *raft.TimeoutNowResponse) {
	*m = raft.TimeoutNowResponse{RPCHeader: readHeader(r)}
}

// decodeRequest decodes the body of a request frame of kind k into the
// command raft's RPC carries.
func decodeRequest(k kind, body []byte) (any, error) {
	r := &binenc.Reader{B: body}
	var cmd any
	switch k {
	case kindAppendEntries, kindHeartbeat:
		cmd = readAppendEntriesRequest(r)
	case kindRequestVote:
		cmd = readRequestVoteRequest(r)
	case kindRequestPreVote:
		cmd = readRequestPreVoteRequest(r)
	case kindTimeoutNow:
		cmd = readTimeoutNowRequest(r)
	default:
		return nil, fmt.Errorf("raftnet: no raft request of kind %d", k)
	}
	return cmd, finish(r)
}

// appendResponse encodes the response raft produced for a request of kind k.
func appendResponse(b []byte, k kind, resp any) ([]byte, error) {
	switch m := resp.(type) {
	case *raft.AppendEntriesResponse:
		if k == kindAppendEntries || k == kindHeartbeat {
			return appendAppendEntriesResponse(b, m), nil
		}
	case *raft.RequestVoteResponse:
		if k == kindRequestVote {
			return appendRequestVoteResponse(b, m), nil
		}
	case *raft.RequestPreVoteResponse:
		if k == kindRequestPreVote {
			return appendRequestPreVoteResponse(b, m), nil
		}
	case *raft.TimeoutNowResponse:
		if k == kindTimeoutNow {
			return appendTimeoutNowResponse(b, m), nil
		}
	}
	return b, fmt.Errorf("raftnet: raft answered a request of kind %d with %T", k, resp)
}

// finish reports a decoding error, or bytes left over after a message.
func finish(r *binenc.Reader) error {
	if err := r.End(); err != nil {
		return fmt.Errorf("raftnet: %w", err)
	}
	return nil
}
