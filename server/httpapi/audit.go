package httpapi

import (
	"context"
	"net/http"
	"strconv"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/cluster"
	"github.com/quorate/quorate/fsm"
)

// defaultAuditPage is how many changes GET /v1/audit lists without a limit.
const defaultAuditPage = 100

// auditOps names each kind of change as the audit trail lists it.
var auditOps = map[fsm.ConfigOpKind]string{
	fsm.OpSetTier:    api.AuditTierSet,
	fsm.OpDeleteTier: api.AuditTierDelete,
	fsm.OpSetDefault: api.AuditDefaultSet,
}

// getAudit answers GET /v1/audit?since=VERSION&limit=N: the configuration
// changes after version since (0, every change the trail holds, if
// absent), oldest first, at most limit of them (1..1000, 100 if absent).
// 409 cluster_version below cluster version 2, which records nothing.
func (s *Server) getAudit(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	since, limit := uint64(0), defaultAuditPage
	for name, vals := range r.URL.Query() {
		v := vals[len(vals)-1]
		switch name {
		case "since":
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil || len(vals) > 1 {
				return badRequest(api.CodeInvalidQuery, "query parameter since must be one configuration version (a whole number from 0), got %q", v)
			}
			since = n
		case "limit":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > cluster.MaxAuditPage || len(vals) > 1 {
				return badRequest(api.CodeInvalidQuery, "query parameter limit must be one whole number from 1 to %d, got %q", cluster.MaxAuditPage, v)
			}
			limit = n
		default:
			return badRequest(api.CodeInvalidQuery, "unknown query parameter %q; GET /v1/audit takes since and limit", name)
		}
	}
	page, err := s.svc.Audit(ctx, since, limit)
	if err != nil {
		return err
	}
	out := api.AuditResponse{Entries: make([]api.AuditEntry, 0, len(page.Entries)), More: page.More, OldestVersion: page.Oldest}
	for _, e := range page.Entries {
		out.Entries = append(out.Entries, auditEntryJSON(e))
	}
	s.writeJSON(w, http.StatusOK, out)
	return nil
}

func auditEntryJSON(e fsm.AuditEntry) api.AuditEntry {
	out := api.AuditEntry{Version: e.Version, TimeUnixNano: e.At, Actor: e.By, Op: auditOps[e.Kind], Tier: e.Tier,
		Before: policyJSON(e.Before), After: policyJSON(e.After)}
	if e.Kind == fsm.OpSetDefault {
		out.Tier = bucket.DefaultTierName
	}
	if e.Kind != fsm.OpDeleteTier {
		out.OnRaise = e.OnRaise.String()
	}
	return out
}

func policyJSON(p *bucket.Policy) *api.Policy {
	if p == nil {
		return nil
	}
	return new(api.PolicyToJSON(*p))
}

// assignmentJSON is a client record's last assignment, nil if none.
func assignmentJSON(r fsm.ClientRecord) *api.Assignment {
	if r.Assigned == (fsm.Act{}) {
		return nil
	}
	return &api.Assignment{Act: *actJSON(r.Assigned), Tier: r.AssignedTier}
}

// actJSON is a, nil if it is none.
func actJSON(a fsm.Act) *api.Act {
	if a == (fsm.Act{}) {
		return nil
	}
	return &api.Act{TimeUnixNano: a.At, Actor: a.By}
}
