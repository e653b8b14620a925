package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/fsm"
)

// refusal is a body and the exact answer the decoder gives it.
type refusal struct {
	body string
	code api.Code
	msg  string
}

// allowRefusals are bodies of POST /v1/allow with the code and message the
// token-by-token decoder gave them before the one-pass scanner existed:
// refusals must not change wording because the fast path did.
var allowRefusals = []refusal{
	{"", "invalid_json", "body is empty; send a JSON object"},
	{" \n", "invalid_json", "body is empty; send a JSON object"},
	{`{"client":`, "invalid_json", `malformed JSON in field "client": unexpected end of JSON`},
	{`{"client":"a"`, "invalid_json", `malformed JSON after field "client": unexpected end of JSON`},
	{`{"client":"a",}`, "invalid_json", `malformed JSON after field "client": invalid character '}' looking for beginning of object key string`},
	{`["a"]`, "invalid_json", "body must be a JSON object, got an array"},
	{`"alice"`, "invalid_json", "body must be a JSON object, got a string"},
	{`{"client":"a"}{"client":"b"}`, "invalid_json", "found an object after the JSON object; send exactly one"},
	{`{"client":"a"} x`, "invalid_json", "unexpected data after the JSON object: invalid character 'x' looking for beginning of value"},
	{`{"client":"a"} 1`, "invalid_json", "found a number after the JSON object; send exactly one"},
	{`{"client":"a","cots":1}`, "unknown_field", `unknown field "cots"`},
	{`{"Client":"a"}`, "unknown_field", `unknown field "Client"`},
	{`{"client":"a","client":"b"}`, "duplicate_field", `field "client" appears more than once`},
	{`{"cost":1}`, "invalid_client", "client is required"},
	{`{"client":null}`, "invalid_client", "client is required"},
	{`{"client":""}`, "invalid_client", "client must not be empty"},
	{`{"client":5}`, "invalid_client", "client must be a string, got a number"},
	{`{"client":{}}`, "invalid_client", "client must be a string, got an object"},
	{`{"client":[1]}`, "invalid_client", "client must be a string, got an array"},
	{`{"client":true}`, "invalid_client", "client must be a string, got a boolean"},
	{`{"client":"` + strings.Repeat("x", 257) + `"}`, "invalid_client", "client is 257 bytes long; at most 256 are allowed"},
	{`{"client":"` + strings.Repeat("é", 129) + `"}`, "invalid_client", "client is 258 bytes long; at most 256 are allowed"},
	{"{\"client\":\"a\xffb\"}", "invalid_client", "client is not valid UTF-8"},
	{`{"client":"a\udc00b"}`, "invalid_client", "client is not valid UTF-8 (an escaped lone surrogate)"},
	{`{"client":"a\ud800\u0041"}`, "invalid_client", "client is not valid UTF-8 (an escaped lone surrogate)"},
	{`{"client":"a\ufffd"}`, "invalid_client", "client is not valid UTF-8 (an escaped lone surrogate)"},
	{`{"client":"a\u0000b"}`, "invalid_client", "client contains the control character U+0000 at byte 1"},
	{`{"client":"a\nb"}`, "invalid_client", "client contains the control character U+000A at byte 1"},
	{`{"client":"a\u007f"}`, "invalid_client", "client contains the control character U+007F at byte 1"},
	{`{"client":"a\u0085"}`, "invalid_client", "client contains the control character U+0085 at byte 1"},
	{"{\"client\":\"a\tb\"}", "invalid_json", `malformed JSON in field "client": invalid character '\t' in string literal`},
	{`{"client":"a\'b"}`, "invalid_json", `malformed JSON in field "client": invalid character '\'' in string escape code`},
	{`{"client":"a\u12"}`, "invalid_json", `malformed JSON in field "client": invalid character '"' in \u hexadecimal character escape`},
	{`{"client":"a","cost":-1}`, "invalid_cost", "cost must not be negative, got -1"},
	{`{"client":"a","cost":1.5}`, "invalid_cost", "cost must be a whole number of tokens, got 1.5"},
	{`{"client":"a","cost":1e-3}`, "invalid_cost", "cost must be a whole number of tokens, got 1e-3"},
	{`{"client":"a","cost":-0.5}`, "invalid_cost", "cost must be a whole number of tokens, got -0.5"},
	{`{"client":"a","cost":1000000001}`, "invalid_cost", "cost must be at most 1000000000, got 1000000001"},
	{`{"client":"a","cost":1e30}`, "invalid_cost", "cost must be at most 1000000000, got 1e30"},
	{`{"client":"a","cost":-1e30}`, "invalid_cost", "cost must not be negative, got -1e30"},
	{`{"client":"a","cost":9223372036854775808}`, "invalid_cost", "cost must be at most 1000000000, got 9223372036854775808"},
	{`{"client":"a","cost":1e999999999999}`, "invalid_cost", "cost must be a whole number from 0 to 1000000000, got 1e999999999999"},
	{`{"client":"a","cost":"1"}`, "invalid_cost", "cost must be a number, got a string"},
	{`{"client":"a","cost":true}`, "invalid_cost", "cost must be a number, got a boolean"},
	{`{"client":"a","cost":NaN}`, "invalid_json", `malformed JSON in field "cost": invalid character 'N' looking for beginning of value`},
	{`{"client":"a","cost":Infinity}`, "invalid_json", `malformed JSON in field "cost": invalid character 'I' looking for beginning of value`},
	{`{"client":"a","cost":0x10}`, "invalid_json", `malformed JSON after field "cost": invalid character 'x' after object key:value pair`},
	{`{"client":"a","cost":01}`, "invalid_json", `malformed JSON after field "cost": invalid character '1' after object key:value pair`},
	{`{"client":"a","cost":1.}`, "invalid_json", `malformed JSON in field "cost": invalid character '}' after decimal point in numeric literal`},
	{`{"client":"a","cost":+1}`, "invalid_json", `malformed JSON in field "cost": invalid character '+' looking for beginning of value`},
	{`{"client":"a","cost":-}`, "invalid_json", `malformed JSON in field "cost": invalid character '}' in numeric literal`},
	{`{"client":"a","request_id":"` + strings.Repeat("x", 129) + `"}`, "invalid_request_id", "request_id is 129 bytes long; at most 128 are allowed"},
	{`{"client":"a","request_id":7}`, "invalid_request_id", "request_id must be a string, got a number"},
	{`{"client":"a","request_id":"r\t1"}`, "invalid_request_id", "request_id contains the control character U+0009 at byte 1"},
	{`{"client":"a","cost":null,"cost":2}`, "duplicate_field", `field "cost" appears more than once`},
	{`{"client" "a"}`, "invalid_json", `malformed JSON in field "client": expected colon after object key`},
	{`{client:"a"}`, "invalid_json", "malformed JSON: invalid character 'c'"},
	{`{"client":"a";}`, "invalid_json", `malformed JSON after field "client": invalid character ';' after object key:value pair`},
	{`{"client":'a'}`, "invalid_json", `malformed JSON in field "client": invalid character '\'' looking for beginning of value`},
	{`{"client":nul}`, "invalid_json", `malformed JSON in field "client": invalid character '}' in literal null (expecting 'l')`},
	{`{"client":"a" "cost":1}`, "invalid_json", `malformed JSON after field "client": invalid character '"' after object key:value pair`},
	{`{,"client":"a"}`, "invalid_json", "malformed JSON: invalid character ','"},
	{`{"client":"a"}}`, "invalid_json", "unexpected data after the JSON object: invalid character '}' looking for beginning of value"},
	{`{"client":"a"}]`, "invalid_json", "unexpected data after the JSON object: invalid character ']' looking for beginning of value"},
	{"\ufeff{\"client\":\"a\"}", "invalid_json", "malformed JSON: invalid character 'ï' looking for beginning of value"},
	{"{\"client\":\"a\"}\u00a0", "invalid_json", "unexpected data after the JSON object: invalid character 'Â' looking for beginning of value"},
	{`{"\u0063lient":"a","client":"b"}`, "duplicate_field", `field "client" appears more than once`},
	{`{"client":"a","":1}`, "unknown_field", `unknown field ""`},
	{"null", "invalid_json", "body must be a JSON object, got null"},
	{"123", "invalid_json", "body must be a JSON object, got a number"},
	{"{}", "invalid_client", "client is required"},
	{`{"requests":[{"client":"a"}]}`, "unknown_field", `unknown field "requests"`},
}

// batchRefusals are bodies of POST /v1/allow/batch, decoded with at most
// batchRefusalMax requests, and their exact refusals (see allowRefusals).
var batchRefusals = []refusal{
	{"{}", "empty_batch", "requests must hold at least one request"},
	{`{"requests":[]}`, "empty_batch", "requests must hold at least one request"},
	{`{"requests":null}`, "empty_batch", "requests must hold at least one request"},
	{`{"requests":{"client":"a"}}`, "invalid_json", "requests must be an array, got an object"},
	{`{"requests":[{"client":"a"},5]}`, "invalid_json", "requests[1] must be a JSON object, got a number"},
	{`{"requests":[{"client":"a"},{"client":"b","cost":-1}]}`, "invalid_cost", "requests[1].cost must not be negative, got -1"},
	{`{"requests":[{"client":"a"},{"client":"b"},{}]}`, "invalid_client", "requests[2].client is required"},
	{`{"requests":[{"client":"a","x":1}]}`, "unknown_field", `unknown field "requests[0].x"`},
	{`{"requests":[{"client":"a"}],"x":1}`, "unknown_field", `unknown field "x"`},
	{`{"requests":[{"client":"a"}]}]`, "invalid_json", "unexpected data after the JSON object: invalid character ']' looking for beginning of value"},
	{`{"requests":[{"client":"a"}`, "invalid_json", `malformed JSON in field "requests": unexpected end of JSON`},
	{`{"requests":[{"client":"a"}]`, "invalid_json", `malformed JSON after field "requests": unexpected end of JSON`},
	{`{"requests":[{"client":"a"} {"client":"b"}]}`, "invalid_json", `malformed JSON in field "requests[1]": invalid character '{' after array element`},
	{`{"requests":[{"client":"a"},]}`, "invalid_json", `malformed JSON in field "requests[1]": invalid character ']' looking for beginning of value`},
	{`{"requests":[,{"client":"a"}]}`, "invalid_json", `malformed JSON in field "requests[0]": invalid character ',' looking for beginning of value`},
	{`{"requests":"a"}`, "invalid_json", "requests must be an array, got a string"},
	{`{"requests":5}`, "invalid_json", "requests must be an array, got a number"},
	{`{"requests":[{"client":"a"}],"requests":[{"client":"b"}]}`, "duplicate_field", `field "requests" appears more than once`},
	{`{"requests":null,"requests":[{"client":"b"}]}`, "duplicate_field", `field "requests" appears more than once`},
	{`{"requests":[{"client":"a"},{"client":"b"},{"client":"c"},{"client":"d"},{"client":"e"}]}`, "batch_too_large", "requests holds more than 4 requests; split the batch"},
	{`{"requests":[{"client":"a"}]} {}`, "invalid_json", "found an object after the JSON object; send exactly one"},
	{`[{"client":"a"}]`, "invalid_json", "body must be a JSON object, got an array"},
	{"", "invalid_json", "body is empty; send a JSON object"},
	{`{"requests":[{"client":"a\ud800"}]}`, "invalid_client", "requests[0].client is not valid UTF-8 (an escaped lone surrogate)"},
	{`{"requests":[null]}`, "invalid_json", "requests[0] must be a JSON object, got null"},
	{`{"requests":[{"client":"a"}], }`, "invalid_json", `malformed JSON after field "requests": invalid character '}' looking for beginning of object key string`},
	{`{"Requests":[{"client":"a"}]}`, "unknown_field", `unknown field "Requests"`},
}

const batchRefusalMax = 4

// assertRefusal checks that err is the 400 with want's code and message.
func assertRefusal(t *testing.T, want refusal, err error) {
	t.Helper()
	var ae *apiError
	require.True(t, errors.As(err, &ae), "%q: got %v, want a refusal", want.body, err)
	assert.Equal(t, 400, ae.status, "%q", want.body)
	assert.Equal(t, want.code, ae.code, "%q", want.body)
	assert.Equal(t, want.msg, ae.msg, "%q", want.body)
}

func TestDecodeAllowRefusals(t *testing.T) {
	for _, tt := range allowRefusals {
		_, ok := scanAllow([]byte(tt.body))
		assert.False(t, ok, "scanAllow(%q) accepted a body the decoder refuses", tt.body)
		_, err := decodeAllow([]byte(tt.body))
		assertRefusal(t, tt, err)
	}
}

func TestDecodeBatchRefusals(t *testing.T) {
	for _, tt := range batchRefusals {
		_, ok := scanBatch([]byte(tt.body), batchRefusalMax)
		assert.False(t, ok, "scanBatch(%q) accepted a body the decoder refuses", tt.body)
		_, err := decodeBatch([]byte(tt.body), batchRefusalMax)
		assertRefusal(t, tt, err)
	}
}

// allowAccepted are allow bodies the scanner reads itself, with what they
// decode to.
var allowAccepted = []struct {
	body string
	want fsm.AllowRequest
}{
	{`{"client":"a"}`, fsm.AllowRequest{Client: "a", Cost: 1}},
	{`{"client":"alice","cost":3,"request_id":"r-1"}`, fsm.AllowRequest{Client: "alice", Cost: 3, RequestID: "r-1"}},
	{`{"request_id":"r","cost":0,"client":"b"}`, fsm.AllowRequest{Client: "b", Cost: 0, RequestID: "r"}},
	{" \t\r\n{ \"client\" : \"ws\" , \"cost\" : 2 }\n", fsm.AllowRequest{Client: "ws", Cost: 2}},
	{`{"client":"a","cost":null,"request_id":null}`, fsm.AllowRequest{Client: "a", Cost: 1}},
	{`{"cost":null,"client":"a"}`, fsm.AllowRequest{Client: "a", Cost: 1}},
	{`{"client":"a","request_id":""}`, fsm.AllowRequest{Client: "a", Cost: 1}},
	{fmt.Sprintf(`{"client":"big","cost":%d}`, int64(bucket.MaxCost)), fsm.AllowRequest{Client: "big", Cost: bucket.MaxCost}},
	{`{"client":"é 🙂 ü"}`, fsm.AllowRequest{Client: "é 🙂 ü", Cost: 1}},
	{`{"client":"literal ` + "\ufffd" + ` is fine"}`, fsm.AllowRequest{Client: "literal \ufffd is fine", Cost: 1}},
	{`{"client":"q\"b\\s\/e\u00e9\ud83d\ude42\u0041"}`, fsm.AllowRequest{Client: "q\"b\\s/e\u00e9\U0001F642A", Cost: 1}},
	{`{"client":"\u00E9\u00e9"}`, fsm.AllowRequest{Client: "éé", Cost: 1}},
	{`{"client":"` + strings.Repeat("x", fsm.MaxClientLen) + `","request_id":"` + strings.Repeat("r", fsm.MaxRequestIDLen) + `"}`,
		fsm.AllowRequest{Client: strings.Repeat("x", fsm.MaxClientLen), Cost: 1, RequestID: strings.Repeat("r", fsm.MaxRequestIDLen)}},
}

func TestScanAllowAccepts(t *testing.T) {
	for _, tt := range allowAccepted {
		got, ok := scanAllow([]byte(tt.body))
		require.True(t, ok, "scanAllow(%q) declined", tt.body)
		assert.Equal(t, tt.want, got, "scanAllow(%q)", tt.body)
		old, err := decodeAllowStream([]byte(tt.body))
		require.NoError(t, err, "%q", tt.body)
		assert.Equal(t, old, got, "scanAllow(%q) and the streaming decoder disagree", tt.body)
	}
}

// Valid bodies in rare spellings are the streaming decoder's to accept.
func TestScanLeavesRareSpellings(t *testing.T) {
	for _, tt := range []struct {
		body string
		want fsm.AllowRequest
	}{
		{`{"\u0063lient":"a"}`, fsm.AllowRequest{Client: "a", Cost: 1}},
		{`{"client":"a","cost":2.0}`, fsm.AllowRequest{Client: "a", Cost: 2}},
		{`{"client":"a","cost":2e0}`, fsm.AllowRequest{Client: "a", Cost: 2}},
		{`{"client":"a","cost":20E-1}`, fsm.AllowRequest{Client: "a", Cost: 2}},
		{`{"client":"a","cost":-0}`, fsm.AllowRequest{Client: "a", Cost: 0}},
	} {
		_, ok := scanAllow([]byte(tt.body))
		assert.False(t, ok, "scanAllow(%q) accepted a spelling it should leave", tt.body)
		got, err := decodeAllow([]byte(tt.body))
		require.NoError(t, err, "%q", tt.body)
		assert.Equal(t, tt.want, got, "decodeAllow(%q)", tt.body)
	}
}

func TestScanBatchAccepts(t *testing.T) {
	for _, tt := range []struct {
		body string
		want []fsm.AllowRequest
	}{
		{`{"requests":[{"client":"a"}]}`, []fsm.AllowRequest{{Client: "a", Cost: 1}}},
		{" { \"requests\" : [ {\"client\":\"a\",\"cost\":0} , {\"client\":\"b\",\"request_id\":\"x\"} ] } ",
			[]fsm.AllowRequest{{Client: "a"}, {Client: "b", Cost: 1, RequestID: "x"}}},
		{`{"requests":[{"client":"a"},{"client":"b"},{"client":"c"},{"client":"{}"}]}`, // exactly batchRefusalMax
			[]fsm.AllowRequest{{Client: "a", Cost: 1}, {Client: "b", Cost: 1}, {Client: "c", Cost: 1}, {Client: "{}", Cost: 1}}},
	} {
		got, ok := scanBatch([]byte(tt.body), batchRefusalMax)
		require.True(t, ok, "scanBatch(%q) declined", tt.body)
		assert.Equal(t, tt.want, got, "scanBatch(%q)", tt.body)
		old, err := decodeBatchStream([]byte(tt.body), batchRefusalMax)
		require.NoError(t, err, "%q", tt.body)
		assert.Equal(t, old, got, "scanBatch(%q) and the streaming decoder disagree", tt.body)
	}
}

// FuzzScanAllow checks the scanner against the streaming decoder: whatever
// it accepts, the streaming decoder accepts with the same result, so
// decodeAllow answers every body exactly as the streaming decoder alone.
func FuzzScanAllow(f *testing.F) {
	for _, tt := range allowRefusals {
		f.Add([]byte(tt.body))
	}
	for _, tt := range allowAccepted {
		f.Add([]byte(tt.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		want, wantErr := decodeAllowStream(body)
		if got, ok := scanAllow(body); ok {
			require.NoError(t, wantErr, "scanAllow accepted %q", body)
			require.Equal(t, want, got, "%q", body)
		}
		got, err := decodeAllow(body)
		require.Equal(t, wantErr, err, "%q", body)
		require.Equal(t, want, got, "%q", body)
	})
}

// FuzzScanBatch is FuzzScanAllow for batches (of at most batchRefusalMax).
func FuzzScanBatch(f *testing.F) {
	for _, tt := range batchRefusals {
		f.Add([]byte(tt.body))
	}
	for _, tt := range allowAccepted {
		f.Add([]byte(`{"requests":[` + tt.body + `,{"client":"x","cost":7}]}`))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		want, wantErr := decodeBatchStream(body, batchRefusalMax)
		if got, ok := scanBatch(body, batchRefusalMax); ok {
			require.NoError(t, wantErr, "scanBatch accepted %q", body)
			require.Equal(t, want, got, "%q", body)
		}
		got, err := decodeBatch(body, batchRefusalMax)
		require.Equal(t, wantErr, err, "%q", body)
		require.Equal(t, want, got, "%q", body)
	})
}

// FuzzIdentifierOK checks api.IdentifierOK, which the scanner calls, against the rule it implements.
func FuzzIdentifierOK(f *testing.F) {
	for _, s := range []string{"", "a", "a\x7f", "a\u0085", "é", "\xff", "a\x00", strings.Repeat("x", 9)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		const max = 8
		want := len(s) <= max && utf8.ValidString(s) && !strings.ContainsFunc(s, unicode.IsControl)
		require.Equal(t, want, api.IdentifierOK(s, max), "api.IdentifierOK(%q, %d)", s, max)
	})
}

// encodingJSON is what json.NewEncoder(w).Encode(v) writes.
func encodingJSON(t testing.TB, v any) string {
	t.Helper()
	var sb strings.Builder
	require.NoError(t, json.NewEncoder(&sb).Encode(v))
	return sb.String()
}

var answerTiers = []string{"free", "default", "", `q"b\s`, "<&>", "é", "\x00\n\t\u2028", "\xff", "\u007f"}

func TestAppendAllowResponse(t *testing.T) {
	for i, tier := range answerTiers {
		r := api.AllowResponse{Allowed: i%2 == 0, Remaining: int64(i * 1000), Limit: 5, RetryAfterMs: -1, ResetAfterMs: int64(i),
			Tier: tier, StampUnixNano: t0 + int64(i), Duplicate: i%3 == 0, MaybeDuplicate: i%4 == 1, Degraded: i%5 == 2}
		if i%3 != 1 {
			r.RefillPerSecond = json.Number(bucket.FormatRate(int64(i) * bucket.Scale / 7))
		}
		assert.Equal(t, encodingJSON(t, r), string(append(appendAllowJSON(nil, &r), '\n')), "%+v", r)
		e := api.ErrorDetail{Code: api.CodeInvalidClient, Message: "client " + tier}
		assert.Equal(t, encodingJSON(t, api.ErrorBody{Error: e}), string(append(appendErrorBody(nil, &e), '\n')), "%+v", e)
	}
}

func FuzzAppendAllowResponse(f *testing.F) {
	for i, tier := range answerTiers {
		f.Add(i%2 == 0, int64(i), int64(-i), tier, i%3 == 0, int64(i)*bucket.Scale/3)
	}
	f.Fuzz(func(t *testing.T, allowed bool, n, m int64, tier string, dup bool, rate int64) {
		r := api.AllowResponse{Allowed: allowed, Remaining: n, Limit: m, RetryAfterMs: n ^ m, ResetAfterMs: -n, Tier: tier, StampUnixNano: m, Duplicate: dup, MaybeDuplicate: n%2 == 1, Degraded: m%2 == 1}
		if rate >= 0 && rate%5 != 0 {
			r.RefillPerSecond = json.Number(bucket.FormatRate(rate))
		}
		require.Equal(t, encodingJSON(t, r), string(append(appendAllowJSON(nil, &r), '\n')), "%+v", r)
		e := api.ErrorDetail{Code: api.Code(tier), Message: tier + tier}
		require.Equal(t, encodingJSON(t, api.ErrorBody{Error: e}), string(append(appendErrorBody(nil, &e), '\n')), "%+v", e)
	})
}
