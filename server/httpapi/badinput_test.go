package httpapi

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/api"
)

// badInput is a request the server must refuse without calling the service.
type badInput struct {
	name         string
	method, path string
	body         string
	hdr          []string // header name, value pairs
	status       int
	code         api.Code
	// field must appear in the message ("" when the fault is not in one
	// field, e.g. a body that is not an object).
	field string
}

func allowRow(name, body string, code api.Code, field string) badInput {
	return badInput{name: name, method: "POST", path: "/v1/allow", body: body, status: 400, code: code, field: field}
}

func TestBadInputNeverReachesService(t *testing.T) {
	long := func(n int) string { return strings.Repeat("x", n) }
	var rows []badInput

	// POST /v1/allow: JSON shape.
	rows = append(rows,
		allowRow("empty body", "", api.CodeInvalidJSON, "body"),
		allowRow("blank body", " \n", api.CodeInvalidJSON, "body"),
		allowRow("truncated", `{"client":`, api.CodeInvalidJSON, "client"),
		allowRow("truncated after value", `{"client":"a"`, api.CodeInvalidJSON, ""),
		allowRow("trailing comma", `{"client":"a",}`, api.CodeInvalidJSON, ""),
		allowRow("not an object", `["a"]`, api.CodeInvalidJSON, "body"),
		allowRow("a string", `"alice"`, api.CodeInvalidJSON, "body"),
		allowRow("second object", `{"client":"a"}{"client":"b"}`, api.CodeInvalidJSON, "after the JSON object"),
		allowRow("trailing garbage", `{"client":"a"} x`, api.CodeInvalidJSON, "after the JSON object"),
		allowRow("trailing number", `{"client":"a"} 1`, api.CodeInvalidJSON, "after the JSON object"),
		allowRow("unknown field", `{"client":"a","cots":1}`, api.CodeUnknownField, "cots"),
		allowRow("wrong case", `{"Client":"a"}`, api.CodeUnknownField, "Client"),
		allowRow("duplicate field", `{"client":"a","client":"b"}`, api.CodeDuplicateField, "client"),
	)
	// Client ids.
	rows = append(rows,
		allowRow("missing client", `{"cost":1}`, api.CodeInvalidClient, "client"),
		allowRow("null client", `{"client":null}`, api.CodeInvalidClient, "client"),
		allowRow("empty client", `{"client":""}`, api.CodeInvalidClient, "client"),
		allowRow("number client", `{"client":5}`, api.CodeInvalidClient, "client"),
		allowRow("object client", `{"client":{}}`, api.CodeInvalidClient, "client"),
		allowRow("long client", fmt.Sprintf(`{"client":%q}`, long(257)), api.CodeInvalidClient, "client"),
		allowRow("long client in runes", fmt.Sprintf(`{"client":%q}`, strings.Repeat("é", 129)), api.CodeInvalidClient, "client"),
		allowRow("invalid UTF-8 client", "{\"client\":\"a\xffb\"}", api.CodeInvalidClient, "client"),
		allowRow("lone surrogate client", `{"client":"a\udc00b"}`, api.CodeInvalidClient, "client"),
		allowRow("NUL in client", `{"client":"a\u0000b"}`, api.CodeInvalidClient, "client"),
		allowRow("newline in client", `{"client":"a\nb"}`, api.CodeInvalidClient, "client"),
		allowRow("DEL in client", `{"client":"a\u007f"}`, api.CodeInvalidClient, "client"),
		allowRow("C1 control in client", `{"client":"a\u0085"}`, api.CodeInvalidClient, "client"),
	)
	// Costs.
	rows = append(rows,
		allowRow("negative cost", `{"client":"a","cost":-1}`, api.CodeInvalidCost, "cost"),
		allowRow("fractional cost", `{"client":"a","cost":1.5}`, api.CodeInvalidCost, "cost"),
		allowRow("tiny fraction cost", `{"client":"a","cost":1e-3}`, api.CodeInvalidCost, "cost"),
		allowRow("negative fraction cost", `{"client":"a","cost":-0.5}`, api.CodeInvalidCost, "cost"),
		allowRow("cost above max", `{"client":"a","cost":1000000001}`, api.CodeInvalidCost, "cost"),
		allowRow("huge cost", `{"client":"a","cost":1e30}`, api.CodeInvalidCost, "cost"),
		allowRow("huge negative cost", `{"client":"a","cost":-1e30}`, api.CodeInvalidCost, "cost"),
		allowRow("int64 overflow cost", `{"client":"a","cost":9223372036854775808}`, api.CodeInvalidCost, "cost"),
		allowRow("string cost", `{"client":"a","cost":"1"}`, api.CodeInvalidCost, "cost"),
		allowRow("boolean cost", `{"client":"a","cost":true}`, api.CodeInvalidCost, "cost"),
		allowRow("NaN cost", `{"client":"a","cost":NaN}`, api.CodeInvalidJSON, "cost"),
		allowRow("Infinity cost", `{"client":"a","cost":Infinity}`, api.CodeInvalidJSON, "cost"),
		allowRow("hex cost", `{"client":"a","cost":0x10}`, api.CodeInvalidJSON, "cost"),
	)
	// Request ids.
	rows = append(rows,
		allowRow("long request id", fmt.Sprintf(`{"client":"a","request_id":%q}`, long(129)), api.CodeInvalidRequestID, "request_id"),
		allowRow("number request id", `{"client":"a","request_id":7}`, api.CodeInvalidRequestID, "request_id"),
		allowRow("control in request id", `{"client":"a","request_id":"r\t1"}`, api.CodeInvalidRequestID, "request_id"),
	)
	// Transport-level refusals.
	rows = append(rows,
		badInput{name: "text/plain", method: "POST", path: "/v1/allow", body: `{"client":"a"}`,
			hdr: []string{"Content-Type", "text/plain"}, status: 415, code: api.CodeUnsupportedMediaType, field: "Content-Type"},
		badInput{name: "form", method: "POST", path: "/v1/allow", body: `{"client":"a"}`,
			hdr: []string{"Content-Type", "application/x-www-form-urlencoded"}, status: 415, code: api.CodeUnsupportedMediaType, field: "Content-Type"},
		badInput{name: "latin1", method: "POST", path: "/v1/allow", body: `{"client":"a"}`,
			hdr: []string{"Content-Type", "application/json; charset=latin1"}, status: 415, code: api.CodeUnsupportedMediaType, field: "charset"},
		badInput{name: "body too large", method: "POST", path: "/v1/allow",
			body:   fmt.Sprintf(`{"client":"a","request_id":%q}`, long(DefaultMaxBodyBytes)),
			status: 413, code: api.CodeBodyTooLarge, field: "body"},
		badInput{name: "timeout not a number", method: "POST", path: "/v1/allow", body: `{"client":"a"}`,
			hdr: []string{api.HeaderTimeout, "soon"}, status: 400, code: api.CodeInvalidTimeout, field: api.HeaderTimeout},
		badInput{name: "timeout zero", method: "POST", path: "/v1/allow", body: `{"client":"a"}`,
			hdr: []string{api.HeaderTimeout, "0"}, status: 400, code: api.CodeInvalidTimeout, field: api.HeaderTimeout},
		badInput{name: "timeout negative", method: "GET", path: "/v1/tiers",
			hdr: []string{api.HeaderTimeout, "-5"}, status: 400, code: api.CodeInvalidTimeout, field: api.HeaderTimeout},
		badInput{name: "status query", method: "POST", path: "/v1/allow?status=418", body: `{"client":"a"}`,
			status: 400, code: api.CodeInvalidQuery, field: "status"},
	)
	// Batches.
	batch := func(name, body string, status int, code api.Code, field string) badInput {
		return badInput{name: "batch: " + name, method: "POST", path: "/v1/allow/batch", body: body, status: status, code: code, field: field}
	}
	var many strings.Builder
	many.WriteString(`{"requests":[`)
	for i := range DefaultMaxBatch + 1 {
		if i > 0 {
			many.WriteString(",")
		}
		fmt.Fprintf(&many, `{"client":"c%d"}`, i)
	}
	many.WriteString("]}")
	rows = append(rows,
		batch("empty object", `{}`, 400, api.CodeEmptyBatch, "requests"),
		batch("empty array", `{"requests":[]}`, 400, api.CodeEmptyBatch, "requests"),
		batch("null requests", `{"requests":null}`, 400, api.CodeEmptyBatch, "requests"),
		batch("requests not an array", `{"requests":{"client":"a"}}`, 400, api.CodeInvalidJSON, "requests"),
		batch("element not an object", `{"requests":[{"client":"a"},5]}`, 400, api.CodeInvalidJSON, "requests[1]"),
		batch("bad cost in element", `{"requests":[{"client":"a"},{"client":"b","cost":-1}]}`, 400, api.CodeInvalidCost, "requests[1].cost"),
		batch("missing client in element", `{"requests":[{"client":"a"},{"client":"b"},{}]}`, 400, api.CodeInvalidClient, "requests[2].client"),
		batch("unknown field in element", `{"requests":[{"client":"a","x":1}]}`, 400, api.CodeUnknownField, "requests[0].x"),
		batch("unknown top-level field", `{"requests":[{"client":"a"}],"x":1}`, 400, api.CodeUnknownField, "x"),
		batch("trailing data", `{"requests":[{"client":"a"}]}]`, 400, api.CodeInvalidJSON, "after the JSON object"),
		batch("truncated", `{"requests":[{"client":"a"}`, 400, api.CodeInvalidJSON, ""),
		batch("too many", many.String(), 400, api.CodeBatchTooLarge, "requests"),
		batch("too large", fmt.Sprintf(`{"requests":[{"client":"a","request_id":%q}]}`, long(DefaultMaxBatchBodyBytes)), 413, api.CodeBodyTooLarge, "body"),
	)
	// Policies, on both tier and default routes.
	policy := func(name, body string, code api.Code, field string) []badInput {
		return []badInput{
			{name: "tier: " + name, method: "PUT", path: "/v1/tiers/free", body: body, status: 400, code: code, field: field},
			{name: "default: " + name, method: "PUT", path: "/v1/default", body: body, status: 400, code: code, field: field},
		}
	}
	for _, p := range [][]badInput{
		policy("NaN capacity", `{"capacity":NaN,"refill_per_second":1}`, api.CodeInvalidJSON, "capacity"),
		policy("Infinity rate", `{"capacity":5,"refill_per_second":Infinity}`, api.CodeInvalidJSON, "refill_per_second"),
		policy("negative capacity", `{"capacity":-1,"refill_per_second":1}`, api.CodeInvalidPolicy, "capacity"),
		policy("zero capacity", `{"capacity":0,"refill_per_second":1}`, api.CodeInvalidPolicy, "capacity"),
		policy("fractional capacity", `{"capacity":1.5,"refill_per_second":1}`, api.CodeInvalidPolicy, "capacity"),
		policy("capacity above max", `{"capacity":1000000001,"refill_per_second":1}`, api.CodeInvalidPolicy, "capacity"),
		policy("string capacity", `{"capacity":"5","refill_per_second":1}`, api.CodeInvalidPolicy, "capacity"),
		policy("missing capacity", `{"refill_per_second":1}`, api.CodeInvalidPolicy, "capacity"),
		policy("null capacity", `{"capacity":null,"refill_per_second":1}`, api.CodeInvalidPolicy, "capacity"),
		policy("negative rate", `{"capacity":5,"refill_per_second":-1}`, api.CodeInvalidPolicy, "refill_per_second"),
		policy("rate over 9 decimals", `{"capacity":5,"refill_per_second":0.0000000001}`, api.CodeInvalidPolicy, "refill_per_second"),
		policy("rate above max", `{"capacity":5,"refill_per_second":1e10}`, api.CodeInvalidPolicy, "refill_per_second"),
		policy("string rate", `{"capacity":5,"refill_per_second":"1"}`, api.CodeInvalidPolicy, "refill_per_second"),
		policy("missing rate", `{"capacity":5}`, api.CodeInvalidPolicy, "refill_per_second"),
		policy("unknown field", `{"capacity":5,"refill_per_second":1,"burst":3}`, api.CodeUnknownField, "burst"),
		policy("trailing data", `{"capacity":5,"refill_per_second":1} {}`, api.CodeInvalidJSON, "after the JSON object"),
		policy("empty body", ``, api.CodeInvalidJSON, "body"),
	} {
		rows = append(rows, p...)
	}
	// Tier names and client paths.
	rows = append(rows,
		badInput{name: "upper-case tier", method: "PUT", path: "/v1/tiers/Free", body: `{"capacity":5,"refill_per_second":1}`, status: 400, code: api.CodeInvalidTierName, field: "tier"},
		badInput{name: "reserved tier", method: "PUT", path: "/v1/tiers/default", body: `{"capacity":5,"refill_per_second":1}`, status: 400, code: api.CodeInvalidTierName, field: "tier"},
		badInput{name: "long tier", method: "DELETE", path: "/v1/tiers/" + long(65), status: 400, code: api.CodeInvalidTierName, field: "tier"},
		badInput{name: "assign: missing tier", method: "PUT", path: "/v1/clients/a/tier", body: `{}`, status: 400, code: api.CodeInvalidTierName, field: "tier"},
		badInput{name: "assign: empty tier", method: "PUT", path: "/v1/clients/a/tier", body: `{"tier":""}`, status: 400, code: api.CodeInvalidTierName, field: "tier"},
		badInput{name: "assign: number tier", method: "PUT", path: "/v1/clients/a/tier", body: `{"tier":5}`, status: 400, code: api.CodeInvalidTierName, field: "tier"},
		badInput{name: "assign: bad tier name", method: "PUT", path: "/v1/clients/a/tier", body: `{"tier":"Pro"}`, status: 400, code: api.CodeInvalidTierName, field: "tier"},
		badInput{name: "assign: default tier", method: "PUT", path: "/v1/clients/a/tier", body: `{"tier":"default"}`, status: 400, code: api.CodeInvalidTierName, field: "tier"},
		badInput{name: "assign: unknown field", method: "PUT", path: "/v1/clients/a/tier", body: `{"tier":"pro","client":"b"}`, status: 400, code: api.CodeUnknownField, field: "client"},
		badInput{name: "assign: long client", method: "PUT", path: "/v1/clients/" + long(257) + "/tier", body: `{"tier":"pro"}`, status: 400, code: api.CodeInvalidClient, field: "client"},
		badInput{name: "get: long client", method: "GET", path: "/v1/clients/" + long(257), status: 400, code: api.CodeInvalidClient, field: "client"},
		badInput{name: "get: NUL in client", method: "GET", path: "/v1/clients/a%00b", status: 400, code: api.CodeInvalidClient, field: "client"},
		badInput{name: "get: invalid UTF-8 client", method: "GET", path: "/v1/clients/a%FFb", status: 400, code: api.CodeInvalidClient, field: "client"},
		badInput{name: "unassign: control in client", method: "DELETE", path: "/v1/clients/a%0A/tier", status: 400, code: api.CodeInvalidClient, field: "client"},
	)

	svc, _ := newFSMService(t)
	ts := newTestServer(t, svc, Options{})
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			a := ts.send(t, row.method, row.path, row.body, row.hdr...)
			require.Equal(t, row.status, a.status, "%s %s %.200s: %s", row.method, row.path, row.body, a.body)
			e := errorOf(t, a)
			t.Logf("%d %s: %s", a.status, e.Code, e.Message)
			assert.Equal(t, row.code, e.Code, "message: %s", e.Message)
			assert.Contains(t, e.Message, row.field, "the message must name the field")
			assert.Equal(t, "application/json", a.header.Get("Content-Type"))
			assert.Zero(t, svc.calls.Load(), "bad input reached the service")
		})
	}
}

// A body of unknown length (chunked) is cut off at the limit too.
func TestChunkedBodyTooLarge(t *testing.T) {
	svc, _ := newFSMService(t)
	ts := newTestServer(t, svc, Options{MaxBodyBytes: 100})
	body := fmt.Sprintf(`{"client":"a","request_id":%q}`, strings.Repeat("x", 200))
	req, err := http.NewRequest("POST", ts.URL+"/v1/allow", io.MultiReader(strings.NewReader(body)))
	require.NoError(t, err)
	require.Equal(t, int64(0), req.ContentLength, "the body must go out chunked")
	a := ts.do(t, req)
	assert.Equal(t, http.StatusRequestEntityTooLarge, a.status)
	assert.Equal(t, api.CodeBodyTooLarge, errorOf(t, a).Code)
	assert.Zero(t, svc.calls.Load())

	a = ts.send(t, "POST", "/v1/allow", `{"client":"a"}`)
	assert.Equal(t, http.StatusOK, a.status, "a small body still passes")
}

// The limit is exact, whether the length is announced or not.
func TestBodyLimitExact(t *testing.T) {
	const limit = 64
	svc, _ := newFSMService(t)
	s := New(svc, Options{MaxBodyBytes: limit})
	body := func(n int) string {
		const frame = `{"client":""}`
		return `{"client":"` + strings.Repeat("x", n-len(frame)) + `"}`
	}
	for _, tt := range []struct {
		size   int
		status int
	}{{limit - 1, 200}, {limit, 200}, {limit + 1, 413}, {4 * limit, 413}} {
		for _, announced := range []bool{true, false} {
			r := httptest.NewRequest("POST", "/v1/allow", strings.NewReader(body(tt.size)))
			if !announced {
				r.ContentLength = -1
			}
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, r)
			assert.Equal(t, tt.status, rec.Code, "%d bytes, length announced %v: %s", tt.size, announced, rec.Body)
		}
	}
}
