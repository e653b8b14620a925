package httpapi

// Endpoint bodies and identifiers: what each request must hold, validated
// before anything reaches the Service.

import (
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/fsm"
)

// checkIdentifier applies the rules shared by client ids and request ids
// (api.IdentifierProblem) to the value of field. Emptiness is the caller's
// business.
func checkIdentifier(s, field string, code api.Code, max int) error {
	if problem := api.IdentifierProblem(s, max); problem != "" {
		return badRequest(code, "%s %s", field, problem)
	}
	return nil
}

// checkClient validates a client id from a body or a path.
func checkClient(s, field string) error {
	if s == "" {
		return badRequest(api.CodeInvalidClient, "%s must not be empty", field)
	}
	return checkIdentifier(s, field, api.CodeInvalidClient, fsm.MaxClientLen)
}

// costValue parses a cost literal exactly: a whole number in 0..bucket.MaxCost.
// "2", "2.0" and "2e0" are the same cost.
func costValue(raw json.RawMessage, field string) (int64, error) {
	if !isNumber(raw) {
		return 0, badRequest(api.CodeInvalidCost, "%s must be a number, got %s", field, kind(raw))
	}
	lit := string(raw)
	if n, err := strconv.ParseInt(lit, 10, 64); err == nil {
		return checkCost(n, lit, field)
	}
	r, ok := new(big.Rat).SetString(lit)
	if !ok { // a JSON number whose exponent is too large for big.Rat
		return 0, badRequest(api.CodeInvalidCost, "%s must be a whole number from 0 to %d, got %s", field, int64(bucket.MaxCost), lit)
	}
	if !r.IsInt() {
		return 0, badRequest(api.CodeInvalidCost, "%s must be a whole number of tokens, got %s", field, lit)
	}
	if !r.Num().IsInt64() {
		if r.Sign() < 0 {
			return 0, badRequest(api.CodeInvalidCost, "%s must not be negative, got %s", field, lit)
		}
		return 0, badRequest(api.CodeInvalidCost, "%s must be at most %d, got %s", field, int64(bucket.MaxCost), lit)
	}
	return checkCost(r.Num().Int64(), lit, field)
}

func checkCost(n int64, lit, field string) (int64, error) {
	if n < 0 {
		return 0, badRequest(api.CodeInvalidCost, "%s must not be negative, got %s", field, lit)
	}
	if n > bucket.MaxCost {
		return 0, badRequest(api.CodeInvalidCost, "%s must be at most %d, got %s", field, int64(bucket.MaxCost), lit)
	}
	return n, nil
}

// decodeAllowRequest reads one allow object from dec. path is "" for the
// body of POST /v1/allow and "requests[i]" inside a batch.
func decodeAllowRequest(dec *json.Decoder, path string) (fsm.AllowRequest, error) {
	req := fsm.AllowRequest{Cost: 1}
	hasClient := false
	err := walkObject(dec, path, func(dec *json.Decoder, name string) error {
		field := joinPath(path, name)
		raw, err := rawValue(dec, field)
		if err != nil {
			return err
		}
		switch name {
		case "client":
			if isNull(raw) {
				return nil
			}
			s, err := stringValue(raw, field, api.CodeInvalidClient)
			if err != nil {
				return err
			}
			if err := checkClient(s, field); err != nil {
				return err
			}
			req.Client, hasClient = s, true
		case "cost":
			if isNull(raw) {
				return nil
			}
			n, err := costValue(raw, field)
			if err != nil {
				return err
			}
			req.Cost = n
		case "request_id":
			if isNull(raw) {
				return nil
			}
			s, err := stringValue(raw, field, api.CodeInvalidRequestID)
			if err != nil {
				return err
			}
			if err := checkIdentifier(s, field, api.CodeInvalidRequestID, fsm.MaxRequestIDLen); err != nil {
				return err
			}
			req.RequestID = s
		default:
			return errUnknownMember
		}
		return nil
	})
	if err != nil {
		return fsm.AllowRequest{}, err
	}
	if !hasClient {
		return fsm.AllowRequest{}, badRequest(api.CodeInvalidClient, "%s is required", joinPath(path, "client"))
	}
	return req, nil
}

// decodeAllow parses the body of POST /v1/allow: in one pass if the
// scanner accepts it (see allowscan.go), else with the streaming decoder,
// which accepts the rare forms the scanner leaves to it and names the fault
// in everything else.
func decodeAllow(body []byte) (fsm.AllowRequest, error) {
	if req, ok := scanAllow(body); ok {
		return req, nil
	}
	return decodeAllowStream(body)
}

// decodeBatch parses the body of POST /v1/allow/batch, refusing it if it
// holds more than max requests; like decodeAllow, in one pass when it can.
func decodeBatch(body []byte, max int) ([]fsm.AllowRequest, error) {
	if reqs, ok := scanBatch(body, max); ok {
		return reqs, nil
	}
	return decodeBatchStream(body, max)
}

// decodeAllowStream parses the body of POST /v1/allow token by token.
func decodeAllowStream(body []byte) (fsm.AllowRequest, error) {
	var req fsm.AllowRequest
	err := decodeBodyWith(body, func(dec *json.Decoder) error {
		var err error
		req, err = decodeAllowRequest(dec, "")
		return err
	})
	return req, err
}

// decodeBatchStream parses the body of POST /v1/allow/batch token by token,
// refusing it as soon as it holds more than max requests.
func decodeBatchStream(body []byte, max int) ([]fsm.AllowRequest, error) {
	var reqs []fsm.AllowRequest
	err := decodeBody(body, func(dec *json.Decoder, name string) error {
		if name != "requests" {
			return errUnknownMember
		}
		tok, err := dec.Token()
		if err != nil {
			return syntaxError("requests", err)
		}
		if tok == nil {
			return nil
		}
		if d, ok := tok.(json.Delim); !ok || d != '[' {
			return badRequest(api.CodeInvalidJSON, "requests must be an array, got %s", describeToken(tok))
		}
		for dec.More() {
			if len(reqs) == max {
				return badRequest(api.CodeBatchTooLarge, "requests holds more than %d requests; split the batch", max)
			}
			req, err := decodeAllowRequest(dec, fmt.Sprintf("requests[%d]", len(reqs)))
			if err != nil {
				return err
			}
			reqs = append(reqs, req)
		}
		if _, err := dec.Token(); err != nil { // the closing ']'
			return syntaxError("requests", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(reqs) == 0 {
		return nil, badRequest(api.CodeEmptyBatch, "requests must hold at least one request")
	}
	return reqs, nil
}

// decodePolicy parses the body of PUT /v1/tiers/{tier} and PUT
// /v1/default (api.PolicyChange): a policy, and on_raise. Numbers are kept
// as their literals and parsed by bucket.Spec.Parse, whose messages name
// the member.
func decodePolicy(body []byte) (fsm.ConfigOp, error) {
	var spec bucket.Spec
	var onRaise string
	numbers := map[string]*string{
		"capacity": &spec.Capacity, "refill_per_second": &spec.RefillPerSecond,
		"limit": &spec.Limit, "window_seconds": &spec.WindowSeconds,
	}
	words := map[string]*string{
		"algorithm": &spec.Algorithm, "mode": &spec.Mode, "when_unavailable": &spec.WhenUnavailable, "on_raise": &onRaise,
	}
	err := decodeBody(body, func(dec *json.Decoder, name string) error {
		num, word := numbers[name], words[name]
		if num == nil && word == nil {
			return errUnknownMember
		}
		raw, err := rawValue(dec, name)
		if err != nil || isNull(raw) {
			return err
		}
		if num != nil {
			if !isNumber(raw) {
				return badRequest(api.CodeInvalidPolicy, "%s must be a number, got %s", name, kind(raw))
			}
			*num = string(raw)
			return nil
		}
		*word, err = stringValue(raw, name, api.CodeInvalidPolicy)
		return err
	})
	if err != nil {
		return fsm.ConfigOp{}, err
	}
	var op fsm.ConfigOp
	if op.OnRaise, err = bucket.ParseOnRaise(onRaise); err != nil {
		return fsm.ConfigOp{}, badRequest(api.CodeInvalidPolicy, "%v", err)
	}
	if op.Policy, err = spec.Parse(); err != nil {
		return fsm.ConfigOp{}, badRequest(api.CodeInvalidPolicy, "%v", err)
	}
	return op, nil
}

// decodeSetTier parses the body of PUT /v1/clients/{client}/tier.
func decodeSetTier(body []byte) (string, error) {
	tier, has := "", false
	err := decodeBody(body, func(dec *json.Decoder, name string) error {
		if name != "tier" {
			return errUnknownMember
		}
		raw, err := rawValue(dec, name)
		if err != nil {
			return err
		}
		if isNull(raw) {
			return nil
		}
		tier, err = stringValue(raw, name, api.CodeInvalidTierName)
		has = err == nil
		return err
	})
	if err != nil {
		return "", err
	}
	if !has || tier == "" {
		return "", badRequest(api.CodeInvalidTierName, "tier is required; DELETE the assignment to remove it")
	}
	if err := bucket.ValidateTierName(tier); err != nil {
		return "", badRequest(api.CodeInvalidTierName, "tier: %v", err)
	}
	return tier, nil
}
