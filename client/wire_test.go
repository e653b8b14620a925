package client

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/internal/jsonscan"
)

func costOf(n int64) *int64 { return &n }

// wireRequests are requests whose encoding has something to get wrong:
// no cost, a peek, the largest cost, ids that need escapes, HTML
// characters, non-ASCII and invalid UTF-8.
var wireRequests = []api.AllowRequest{
	{Client: "alice"},
	{Client: "bob", Cost: costOf(0)},
	{Client: "carol", Cost: costOf(math.MaxInt64), RequestID: "r-1"},
	{Client: `quote"back\slash`, Cost: costOf(-3), RequestID: "tab\tnl\n"},
	{Client: "<html>&amp;", RequestID: "é€😀"},
	{Client: "bad\xffutf8"},
	{Client: ""},
}

func TestWireEncodesAsJSON(t *testing.T) {
	for _, r := range wireRequests {
		want, err := json.Marshal(r)
		require.NoError(t, err)
		assert.Equal(t, string(want), string(allowBody{&r}.appendJSON(nil)), "%+v", r)
	}
	for _, reqs := range [][]api.AllowRequest{nil, {}, wireRequests[:1], wireRequests} {
		want, err := json.Marshal(api.BatchRequest{Requests: reqs})
		require.NoError(t, err)
		assert.Equal(t, string(want), string(batchBody(reqs).appendJSON(nil)), "%d requests", len(reqs))
	}
}

// TestWireSizeHintHoldsThePlainBody: where no string needs an escape, the
// size hint is room for the whole body, so send allocates it once.
func TestWireSizeHintHoldsThePlainBody(t *testing.T) {
	plain := []api.AllowRequest{wireRequests[0], wireRequests[1], wireRequests[2], {Client: "dave", Cost: costOf(math.MinInt64)}}
	for _, r := range plain {
		body := allowBody{&r}
		assert.GreaterOrEqual(t, body.sizeHint(), len(body.appendJSON(nil)), "%+v", r)
	}
	for _, reqs := range [][]api.AllowRequest{nil, {}, plain[:1], plain} {
		body := batchBody(reqs)
		assert.GreaterOrEqual(t, body.sizeHint(), len(body.appendJSON(nil)), "%d requests", len(reqs))
	}
	assert.Equal(t, 1.0, testing.AllocsPerRun(100, func() {
		body := batchBody(plain)
		_ = body.appendJSON(make([]byte, 0, body.sizeHint()))
	}), "allocations to encode a batch into its hinted buffer")
}

// randomAnswer is an answer with every field the server may set.
func randomAnswer(rng *rand.Rand) api.AllowResponse {
	r := api.AllowResponse{
		Allowed: rng.IntN(2) == 0, Remaining: rng.Int64N(1 << 40), Limit: rng.Int64N(1 << 40),
		RetryAfterMs: rng.Int64N(1<<20) - 1, ResetAfterMs: rng.Int64N(1<<20) - 1,
		Tier: []string{"free", "default", "pro-2", "tiér", ""}[rng.IntN(5)], StampUnixNano: rng.Int64(),
		Duplicate: rng.IntN(4) == 0, MaybeDuplicate: rng.IntN(4) == 0, Degraded: rng.IntN(4) == 0,
	}
	if rng.IntN(2) == 0 {
		r.RefillPerSecond = json.Number([]string{"0", "1", "0.5", "1000000", "0.000000001"}[rng.IntN(5)])
	}
	if rng.IntN(3) == 0 {
		r.WindowSeconds = rng.Int64N(86_400) + 1
	}
	if rng.IntN(3) == 0 {
		r.SetShadow(rng.IntN(2) == 0)
	}
	return r
}

// The scanner reads every answer the server writes (no fall back to
// encoding/json) and gets what json.Unmarshal gets.
func TestWireDecodesTheServersAnswers(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range 50 {
		want := api.BatchResponse{Results: make([]api.AllowResponse, n)}
		for i := range want.Results {
			want.Results[i] = randomAnswer(rng)
		}
		data, err := json.Marshal(want)
		require.NoError(t, err)
		data = append(data, '\n') // the server's encoder ends with one

		var got api.BatchResponse
		p := jsonscan.New(string(data))
		require.True(t, scanBatchResponse(&p, &got) && p.End(), "the scanner gives up on %s", data)
		assert.Equal(t, want, got)

		if n > 0 {
			one, err := json.Marshal(want.Results[0])
			require.NoError(t, err)
			var a api.AllowResponse
			p := jsonscan.New(string(one))
			require.True(t, scanAllowResponse(&p, &a) && p.End(), "the scanner gives up on %s", one)
			assert.Equal(t, want.Results[0], a)
		}
	}
}

// Whatever the bytes, the decoders return what json.Unmarshal returns into
// a zero value: the same value, and an error exactly when it has one.
func FuzzWireDecodesAsJSON(f *testing.F) {
	for _, s := range []string{
		`{"results":[{"allowed":true,"remaining":4,"limit":5,"retry_after_ms":0,"reset_after_ms":1000,"tier":"free","stamp_unix_nano":17,"refill_per_second":1}]}` + "\n",
		`{"results":[]}`, `{"results":null}`, `{}`, `{"results":[{}, {"would_allow":false,"shadow":true}]}`,
		`{"results":[{"allowed":true}],"results":[{"limit":2}]}`,
		`{"Results":[{"Allowed":true}]}`, `{"results":[{"tier":"a\"b"}]}`, `{"results":[{"tier":"\u00e9"}]}`,
		`{"results":[{"remaining":1e3}]}`, `{"results":[{"remaining":-0}]}`, `{"results":[{"remaining":01}]}`,
		`{"results":[{"remaining":9223372036854775808}]}`, `{"results":[{"refill_per_second":"1.5"}]}`,
		`{"results":[{"refill_per_second":1.5e-3}]}`, `{"results":[{"allowed":null}]}`, `{"results":[{"x":[1,{"y":2}]}]}`,
		`{"results":[{"tier":"` + "\xff" + `"}]}`, `{"results":[{"allowed":truex}]}`, ` { "results" : [ { "limit" : 3 } ] } `,
		`{"results":[{"limit":3}]} x`, `{"results":[{"limit":3},]}`, `[]`, ``, `{"allowed":true,"tier":"pro","would_allow":true}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var want api.BatchResponse
		wantErr := json.Unmarshal(data, &want)
		var got batchAnswer
		err := got.decodeJSON(data)
		require.Equal(t, wantErr != nil, err != nil, "batch %q: %v against json's %v", data, err, wantErr)
		if err == nil {
			assert.Equal(t, want, got.BatchResponse, "batch %q", data)
		}

		var wantOne api.AllowResponse
		wantErr = json.Unmarshal(data, &wantOne)
		var one allowAnswer
		err = one.decodeJSON(data)
		require.Equal(t, wantErr != nil, err != nil, "answer %q: %v against json's %v", data, err, wantErr)
		if err == nil {
			assert.Equal(t, wantOne, one.AllowResponse, "answer %q", data)
		}
	})
}

// BenchmarkDecodeBatch decodes a coalesced batch's answer (8 results) by
// hand and by encoding/json.
func BenchmarkDecodeBatch(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	resp := api.BatchResponse{Results: make([]api.AllowResponse, 8)}
	for i := range resp.Results {
		resp.Results[i] = randomAnswer(rng)
	}
	data, err := json.Marshal(resp)
	require.NoError(b, err)
	b.Run("wire", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var out batchAnswer
			if err := out.decodeJSON(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var out api.BatchResponse
			if err := json.Unmarshal(data, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkEncodeBatch is BenchmarkDecodeBatch for the request.
func BenchmarkEncodeBatch(b *testing.B) {
	reqs := make([]api.AllowRequest, 8)
	for i := range reqs {
		reqs[i] = api.AllowRequest{Client: "client-" + string(rune('a'+i)), RequestID: "0123456789abcdef"}
	}
	b.Run("wire", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			body := batchBody(reqs)
			_ = body.appendJSON(make([]byte, 0, body.sizeHint())) // as send does
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(api.BatchRequest{Requests: reqs}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestCarrierSkipsTheHTTPClientOnlyWhereItAddsNothing: a plain
// http.Client is passed over for its transport, so a redirect is an answer
// like any other; a client with a redirect policy or a cookie jar of its
// own keeps carrying the calls, with both.
func TestCarrierSkipsTheHTTPClientOnlyWhereItAddsNothing(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "seen", Value: "1"})
		if r.URL.Path == "/away" {
			http.Redirect(w, r, "/here", http.StatusTemporaryRedirect)
		}
	}))
	t.Cleanup(srv.Close)
	get := func(do carrier) *http.Response {
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/away", nil)
		require.NoError(t, err)
		resp, err := do(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		return resp
	}

	assert.Equal(t, http.StatusTemporaryRedirect, get(carrierOf(&http.Client{})).StatusCode, "a plain client: not followed")

	var redirects int
	policy := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { redirects++; return nil }}
	assert.Equal(t, http.StatusOK, get(carrierOf(policy)).StatusCode, "the client's redirect policy applies")
	assert.Equal(t, 1, redirects)

	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	get(carrierOf(&http.Client{Jar: jar}))
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	assert.Len(t, jar.Cookies(u), 1, "the client's cookie jar was used")
}
