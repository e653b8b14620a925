package raftnet

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/internal/binenc"
)

// fill sets every field of v, recursively, to a random non-zero value. It
// fails the test on a field kind it does not know, so a raft upgrade that
// adds a field of a new kind is noticed here.
func fill(t *testing.T, rng *rand.Rand, v reflect.Value) {
	t.Helper()
	if v.Type() == reflect.TypeOf(time.Time{}) {
		v.Set(reflect.ValueOf(time.Unix(0, rng.Int64N(1<<62)+1)))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			fill(t, rng, v.Field(i))
		}
	case reflect.Uint64:
		v.SetUint(rng.Uint64() | 1)
	case reflect.Uint8:
		v.SetUint(uint64(rng.IntN(255) + 1))
	case reflect.Int, reflect.Int64:
		v.SetInt(rng.Int64N(1<<40) + 1)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Slice:
		n := 1 + rng.IntN(3)
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			fill(t, rng, s.Index(i))
		}
		v.Set(s)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(t, rng, p.Elem())
		v.Set(p)
	default:
		require.FailNowf(t, "unknown field kind", "%s of kind %s", v.Type(), v.Kind())
	}
}

// roundTrip checks that every field of a filled M survives encode and
// decode, and that a truncated encoding is an error, never a panic.
func roundTrip[M any](t *testing.T, encode func([]byte, *M) []byte, decode func(*binenc.Reader) *M) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		var in M
		fill(t, rng, reflect.ValueOf(&in).Elem())
		b := encode(nil, &in)
		r := &binenc.Reader{B: b}
		out := decode(r)
		require.NoError(t, finish(r))
		assert.Equal(t, &in, out)
		for cut := range len(b) {
			r := &binenc.Reader{B: b[:cut]}
			decode(r)
			assert.Error(t, finish(r), "decoding %d of %d bytes", cut, len(b))
		}
	}
	var zero M
	r := &binenc.Reader{B: encode(nil, &zero)}
	out := decode(r)
	require.NoError(t, finish(r))
	assert.Equal(t, &zero, out, "the zero message")
}

func into[M any](read func(*binenc.Reader, *M)) func(*binenc.Reader) *M {
	return func(r *binenc.Reader) *M {
		var m M
		read(r, &m)
		return &m
	}
}

func TestEveryRaftMessageRoundTrips(t *testing.T) {
	t.Run("AppendEntriesRequest", func(t *testing.T) {
		roundTrip(t, appendAppendEntriesRequest, readAppendEntriesRequest)
	})
	t.Run("AppendEntriesResponse", func(t *testing.T) {
		roundTrip(t, appendAppendEntriesResponse, into(readAppendEntriesResponse))
	})
	t.Run("RequestVoteRequest", func(t *testing.T) {
		roundTrip(t, appendRequestVoteRequest, readRequestVoteRequest)
	})
	t.Run("RequestVoteResponse", func(t *testing.T) {
		roundTrip(t, appendRequestVoteResponse, into(readRequestVoteResponse))
	})
	t.Run("RequestPreVoteRequest", func(t *testing.T) {
		roundTrip(t, appendRequestPreVoteRequest, readRequestPreVoteRequest)
	})
	t.Run("RequestPreVoteResponse", func(t *testing.T) {
		roundTrip(t, appendRequestPreVoteResponse, into(readRequestPreVoteResponse))
	})
	t.Run("InstallSnapshotRequest", func(t *testing.T) {
		roundTrip(t, appendInstallSnapshotRequest, readInstallSnapshotRequest)
	})
	t.Run("InstallSnapshotResponse", func(t *testing.T) {
		roundTrip(t, appendInstallSnapshotResponse, into(readInstallSnapshotResponse))
	})
	t.Run("TimeoutNowRequest", func(t *testing.T) {
		roundTrip(t, appendTimeoutNowRequest, readTimeoutNowRequest)
	})
	t.Run("TimeoutNowResponse", func(t *testing.T) {
		roundTrip(t, appendTimeoutNowResponse, into(readTimeoutNowResponse))
	})
}

func TestHeartbeatsAreRecognisedLikeRaftDoes(t *testing.T) {
	hb := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{Addr: []byte("a:1")}, Term: 3}
	assert.True(t, isHeartbeat(hb))
	//lint:ignore SA1019 raft v1.8.0 still fills the deprecated field; a transport must carry every field
	legacy := &raft.AppendEntriesRequest{Term: 3, Leader: []byte("a:1")}
	assert.True(t, isHeartbeat(legacy), "an old leader names itself in Leader")
	for name, change := range map[string]func(*raft.AppendEntriesRequest){
		"no term":        func(r *raft.AppendEntriesRequest) { r.Term = 0 },
		"no leader":      func(r *raft.AppendEntriesRequest) { r.Addr = nil },
		"prev entry":     func(r *raft.AppendEntriesRequest) { r.PrevLogEntry = 1 },
		"prev term":      func(r *raft.AppendEntriesRequest) { r.PrevLogTerm = 1 },
		"entries":        func(r *raft.AppendEntriesRequest) { r.Entries = []*raft.Log{{Index: 1}} },
		"a commit index": func(r *raft.AppendEntriesRequest) { r.LeaderCommitIndex = 1 },
	} {
		r := *hb
		change(&r)
		assert.False(t, isHeartbeat(&r), name)
	}
}

func TestFramesRejectWhatTheyCannotParse(t *testing.T) {
	q := endFrame(append(beginRequest(nil, kindCall, 7, "allow", time.Unix(0, 42)), "body"...))
	got, err := parseRequest(q[4:])
	require.NoError(t, err)
	assert.Equal(t, request{kind: kindCall, seq: 7, group: "allow", deadline: time.Unix(0, 42), body: []byte("body")}, got)

	_, err = parseRequest([]byte{byte(kindCall)})
	assert.Error(t, err, "a truncated request frame")
	_, _, _, err = parseResponse([]byte{7, 9})
	assert.Error(t, err, "an unknown status")
	_, err = decodeRequest(kind(99), nil)
	assert.Error(t, err, "an unknown kind")
	_, err = appendResponse(nil, kindRequestVote, &raft.AppendEntriesResponse{})
	assert.Error(t, err, "an answer of the wrong type")
}

func TestHurryMakesEmptyRequestsUrgentForAWhile(t *testing.T) {
	tr := &Transport{}
	assert.True(t, tr.lazy(0), "a request without entries waits for the tick")
	assert.False(t, tr.lazy(3), "entries never wait")
	tr.Hurry(time.Hour)
	assert.False(t, tr.lazy(0), "hurried")
	tr.Hurry(time.Nanosecond)
	assert.False(t, tr.lazy(0), "a shorter hurry does not cut a longer one short")
	tr.hurry.Store(time.Now().Add(-time.Second).UnixNano())
	assert.True(t, tr.lazy(0), "once the hurry is over, waiting again")
}
