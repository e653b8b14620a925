package jsonscan_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/internal/jsonscan"
)

// Whatever a Scanner accepts, encoding/json reads as the same value.
func FuzzScannerReadsAsJSON(f *testing.F) {
	for _, s := range []string{
		`"plain"`, `"a\"b\\c\/d\b\f\n\r\t"`, `"\u00e9\u20ac"`, `"\ud83d\ude00"`, `"\ud800"`, "\"\xff\"", `"tab	"`,
		`0`, `-0`, `12`, `01`, `1.5`, `1e3`, `-2.5E-7`, `9223372036854775808`, `true`, `false`, `null`, ` {"a":1, "b" : "x"} `,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		// read runs one method over the whole of s; whole says whether it
		// accepted s and nothing but white space followed.
		read := func(method func(p *jsonscan.Scanner) bool) (whole bool) {
			p := jsonscan.New(s)
			return method(&p) && p.End()
		}
		var str string
		if read(func(p *jsonscan.Scanner) (ok bool) { str, ok = p.Str(); return ok }) {
			var want string
			require.NoError(t, json.Unmarshal([]byte(s), &want), "Str accepted %q", s)
			assert.Equal(t, want, str, "Str of %q", s)
		}
		var num string
		if read(func(p *jsonscan.Scanner) (ok bool) { num, ok = p.Number(); return ok }) {
			var want json.Number
			require.NoError(t, json.Unmarshal([]byte(s), &want), "Number accepted %q", s)
			assert.Equal(t, string(want), num, "Number of %q", s)
		}
		var n int64
		if read(func(p *jsonscan.Scanner) (ok bool) { n, ok = p.Int(); return ok }) {
			var want int64
			require.NoError(t, json.Unmarshal([]byte(s), &want), "Int accepted %q", s)
			assert.Equal(t, want, n, "Int of %q", s)
		}
		var count uint64
		if read(func(p *jsonscan.Scanner) (ok bool) { count, ok = p.Count(19); return ok }) {
			var want uint64
			require.NoError(t, json.Unmarshal([]byte(s), &want), "Count accepted %q", s)
			assert.Equal(t, want, count, "Count of %q", s)
		}
		var b bool
		if read(func(p *jsonscan.Scanner) (ok bool) { b, ok = p.Bool(); return ok }) {
			var want bool
			require.NoError(t, json.Unmarshal([]byte(s), &want), "Bool accepted %q", s)
			assert.Equal(t, want, b, "Bool of %q", s)
		}
		members := map[string]string{}
		if read(func(p *jsonscan.Scanner) bool {
			return p.Members(func(name string) (ok bool) { members[name], ok = p.Str(); return ok })
		}) {
			var want map[string]string
			require.NoError(t, json.Unmarshal([]byte(s), &want), "Members accepted %q", s)
			assert.Equal(t, want, members, "Members of %q", s)
		}
	})
}

// Where encoding/json would read something other than the text (a lone
// surrogate or invalid UTF-8 becomes U+FFFD), or nothing at all, a Scanner
// gives up.
func TestScannerGivesUpWhereJSONWouldReadSomethingElse(t *testing.T) {
	methods := map[string]func(p *jsonscan.Scanner) bool{
		"Str":    func(p *jsonscan.Scanner) bool { _, ok := p.Str(); return ok },
		"Number": func(p *jsonscan.Scanner) bool { _, ok := p.Number(); return ok },
		"Int":    func(p *jsonscan.Scanner) bool { _, ok := p.Int(); return ok },
		"Bool":   func(p *jsonscan.Scanner) bool { _, ok := p.Bool(); return ok },
		"Members": func(p *jsonscan.Scanner) bool {
			return p.Members(func(string) bool { _, ok := p.Int(); return ok })
		},
	}
	for _, s := range []string{
		`"\ud800"`, "\"\xff\"", "\"a\nb\"", `"\x"`, `"open`, `01`, `-`, `1.`, `1e`, `1.5x`,
		`tru`, `{"a":1,}`, `{"a" 1}`, `{"a":1`, `{a:1}`, ``,
	} {
		for name, method := range methods {
			p := jsonscan.New(s)
			if method(&p) {
				assert.False(t, p.End(), "%s accepted %q", name, s)
			}
		}
	}
	for _, s := range []string{`-1`, `01`, `1.0`, `2e0`, `1234`, `"1"`} {
		p := jsonscan.New(s)
		_, ok := p.Count(3)
		assert.False(t, ok && p.End(), "Count(3) accepted %q", s)
	}
	p := jsonscan.New("9223372036854775808")
	_, ok := p.Int()
	assert.False(t, ok, "Int accepted a number past int64")
}
