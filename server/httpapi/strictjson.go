package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/quorate/quorate/api"
)

// Request bodies are decoded strictly, member by member, so that every
// refusal names the member at fault (as a path like "requests[3].cost"):
//
//   - the body is exactly one JSON object: nothing after it but white space;
//   - member names match exactly (case-sensitive); an unknown member is
//     refused (unknown_field), and so is a repeated one (duplicate_field);
//   - numbers are kept as their literal text and parsed exactly (never
//     through float64), strings are never accepted where a number is
//     expected, and vice versa;
//   - a null member is the same as an absent one.
//
// The allow and batch bodies are offered first to a one-pass scanner
// (allowscan.go). It accepts only what this decoder accepts, with the same
// result, and gives up on anything else, leaving the body (and its
// refusal) to this decoder.

// readAndDecode reads the body (see readBody) into a buffer from s.bufs and
// decodes it with decode. decode must not keep body: the buffer is reused as
// soon as decode returns (the decoders copy every string they keep).
func readAndDecode[T any](s *Server, r *http.Request, limit int64, decode func(body []byte) (T, error)) (T, error) {
	bp := s.bufs.get()
	defer s.bufs.put(bp)
	body, err := readBody(r, limit, (*bp)[:0])
	*bp = body[:0] // keep what the read grew
	if err != nil {
		var zero T
		return zero, err
	}
	return decode(body)
}

// readBody checks r's Content-Type (empty or application/json, charset utf-8
// if given), then reads r's body into buf (reallocated if it is too small)
// and returns it, refusing a body of more than limit bytes with 413.
func readBody(r *http.Request, limit int64, buf []byte) ([]byte, error) {
	// The exact type every client sends needs no media-type parsing.
	if ct := headerValue(r.Header, "Content-Type"); ct != "" && ct != "application/json" {
		mt, params, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			return buf, newError(api.CodeUnsupportedMediaType, fmt.Sprintf("Content-Type %q is not supported; send application/json", ct))
		}
		if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
			return buf, newError(api.CodeUnsupportedMediaType, fmt.Sprintf("charset %q is not supported; send utf-8", cs))
		}
	}
	if r.ContentLength > limit {
		return buf, errBodyTooLarge(limit)
	}
	if r.Body == nil {
		return buf, nil
	}
	// One byte more than the announced length lets the read that sees EOF
	// land without growing the buffer.
	if want := int(r.ContentLength) + 1; r.ContentLength > 0 && cap(buf) < want {
		buf = make([]byte, 0, want)
	}
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, max(512, cap(buf)))
		}
		n, err := r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return buf, errBodyTooLarge(limit)
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, badRequest(api.CodeInvalidJSON, "reading body: %v", err)
		}
	}
}

func errBodyTooLarge(limit int64) *apiError {
	return newError(api.CodeBodyTooLarge, fmt.Sprintf("body is larger than %d bytes", limit))
}

// errUnknownMember is returned by a member callback of walkObject for a
// name it does not know.
var errUnknownMember = errors.New("unknown member")

// decodeBody parses body as one JSON object, calling member for each of its
// members (see walkObject), and refuses anything after the object.
func decodeBody(body []byte, member func(dec *json.Decoder, name string) error) error {
	return decodeBodyWith(body, func(dec *json.Decoder) error { return walkObject(dec, "", member) })
}

// walkObject reads one JSON object from dec. For each member it calls
// member with dec positioned at the member's value; member must consume
// exactly that value (typically with rawValue) or return errUnknownMember.
// path prefixes member names in messages ("" at the top level).
func walkObject(dec *json.Decoder, path string, member func(dec *json.Decoder, name string) error) error {
	what := "body"
	if path != "" {
		what = path
	}
	tok, err := dec.Token()
	if err != nil {
		return syntaxError(path, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return badRequest(api.CodeInvalidJSON, "%s must be a JSON object, got %s", what, describeToken(tok))
	}
	var seen []string
	// after names the place of a syntax error between members.
	after := func(err error) error {
		if len(seen) == 0 {
			return syntaxError(path, err)
		}
		return badRequest(api.CodeInvalidJSON, "malformed JSON after field %q: %v", joinPath(path, seen[len(seen)-1]), plainSyntax(err))
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return after(err)
		}
		name, ok := tok.(string)
		if !ok { // the decoder yields only strings in key position; be safe anyway
			return badRequest(api.CodeInvalidJSON, "malformed JSON: %s where a field name belongs", describeToken(tok))
		}
		field := joinPath(path, name)
		for _, s := range seen {
			if s == name {
				return badRequest(api.CodeDuplicateField, "field %q appears more than once", field)
			}
		}
		seen = append(seen, name)
		if err := member(dec, name); err != nil {
			if errors.Is(err, errUnknownMember) {
				return badRequest(api.CodeUnknownField, "unknown field %q", field)
			}
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return after(err)
	}
	return nil
}

// rawValue consumes the next value from dec and returns its bytes.
func rawValue(dec *json.Decoder, field string) (json.RawMessage, error) {
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, syntaxError(field, err)
	}
	return raw, nil
}

func syntaxError(field string, err error) error {
	err = plainSyntax(err)
	if field == "" {
		return badRequest(api.CodeInvalidJSON, "malformed JSON: %v", err)
	}
	return badRequest(api.CodeInvalidJSON, "malformed JSON in field %q: %v", field, err)
}

// plainSyntax words a decoder error for a message.
func plainSyntax(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("unexpected end of JSON")
	}
	return err
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func describeToken(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		switch v {
		case '{':
			return "an object"
		case '[':
			return "an array"
		}
		return fmt.Sprintf("%q", string(v))
	case string:
		return "a string"
	case json.Number, float64:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%v", tok)
}

// kind is the JSON type of a raw value, from its first byte.
func kind(raw json.RawMessage) string {
	switch raw[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

func isNull(raw json.RawMessage) bool { return raw[0] == 'n' }

func isNumber(raw json.RawMessage) bool { return raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9') }

// stringValue decodes raw as a JSON string. It refuses bytes that are not
// valid UTF-8 and escapes of lone surrogates, which encoding/json would
// otherwise silently turn into U+FFFD.
func stringValue(raw json.RawMessage, field string, code api.Code) (string, error) {
	if raw[0] != '"' {
		return "", badRequest(code, "%s must be a string, got %s", field, kind(raw))
	}
	if !utf8.Valid(raw) {
		return "", badRequest(code, "%s is not valid UTF-8", field)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", badRequest(code, "%s: %v", field, err)
	}
	if strings.ContainsRune(s, utf8.RuneError) && !bytes.ContainsRune(raw, utf8.RuneError) {
		return "", badRequest(code, "%s is not valid UTF-8 (an escaped lone surrogate)", field)
	}
	return s, nil
}

// decodeBodyWith parses body as one value read by read, and refuses
// anything after it.
func decodeBodyWith(body []byte, read func(dec *json.Decoder) error) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return badRequest(api.CodeInvalidJSON, "body is empty; send a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := read(dec); err != nil {
		return err
	}
	return expectEOF(dec)
}

func expectEOF(dec *json.Decoder) error {
	tok, err := dec.Token()
	switch {
	case err == io.EOF:
		return nil
	case err == nil:
		return badRequest(api.CodeInvalidJSON, "found %s after the JSON object; send exactly one", describeToken(tok))
	}
	return badRequest(api.CodeInvalidJSON, "unexpected data after the JSON object: %v", err)
}
