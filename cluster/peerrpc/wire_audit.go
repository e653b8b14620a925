package peerrpc

import (
	"fmt"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/fsm"
)

// The audit trail as it travels (cluster version 2): a client's record
// inside its view, and pages of configuration changes (POST
// /internal/audit).

// wireRecord is an fsm.ClientRecord.
type wireRecord struct {
	AssignedAt   int64  `json:"assigned_at_unix_nano,omitempty"`
	AssignedBy   string `json:"assigned_by,omitempty"`
	AssignedTier string `json:"assigned_tier,omitempty"`
	ResetAt      int64  `json:"reset_at_unix_nano,omitempty"`
	ResetBy      string `json:"reset_by,omitempty"`
}

// toWireRecord is r as it travels: nil for the zero record.
func toWireRecord(r fsm.ClientRecord) *wireRecord {
	if r == (fsm.ClientRecord{}) {
		return nil
	}
	return &wireRecord{AssignedAt: r.Assigned.At, AssignedBy: r.Assigned.By, AssignedTier: r.AssignedTier, ResetAt: r.Reset.At, ResetBy: r.Reset.By}
}

func (w *wireRecord) record() fsm.ClientRecord {
	if w == nil {
		return fsm.ClientRecord{}
	}
	return fsm.ClientRecord{Assigned: fsm.Act{At: w.AssignedAt, By: w.AssignedBy}, AssignedTier: w.AssignedTier, Reset: fsm.Act{At: w.ResetAt, By: w.ResetBy}}
}

// WireAuditReq asks the meta leader for the changes after Since, at most
// Limit of them.
type WireAuditReq struct {
	Since uint64 `json:"since"`
	Limit int    `json:"limit"`
}

// WireAuditPage is an fsm.AuditPage.
type WireAuditPage struct {
	Entries []wireAuditEntry `json:"entries"`
	More    bool             `json:"more,omitempty"`
	Oldest  uint64           `json:"oldest,omitempty"`
}

type wireAuditEntry struct {
	Version uint64      `json:"version"`
	At      int64       `json:"at_unix_nano"`
	By      string      `json:"by"`
	Kind    string      `json:"kind"` // see opKinds
	Tier    string      `json:"tier,omitempty"`
	Before  *wirePolicy `json:"before,omitempty"`
	After   *wirePolicy `json:"after,omitempty"`
	OnRaise uint8       `json:"on_raise,omitempty"`
}

// ToWireAuditPage is p as it travels.
func ToWireAuditPage(p fsm.AuditPage) WireAuditPage {
	w := WireAuditPage{Entries: make([]wireAuditEntry, 0, len(p.Entries)), More: p.More, Oldest: p.Oldest}
	for _, e := range p.Entries {
		we := wireAuditEntry{Version: e.Version, At: e.At, By: e.By, Kind: opKinds[e.Kind], Tier: e.Tier, OnRaise: uint8(e.OnRaise)}
		if e.Before != nil {
			we.Before = new(toWirePolicy(*e.Before))
		}
		if e.After != nil {
			we.After = new(toWirePolicy(*e.After))
		}
		w.Entries = append(w.Entries, we)
	}
	return w
}

// Page is the page w carries, refused if an entry's kind is unknown.
func (w WireAuditPage) Page() (fsm.AuditPage, error) {
	p := fsm.AuditPage{Entries: make([]fsm.AuditEntry, 0, len(w.Entries)), More: w.More, Oldest: w.Oldest}
	for _, we := range w.Entries {
		kind, err := opKind(we.Kind)
		if err != nil {
			return fsm.AuditPage{}, fmt.Errorf("audit entry %d: %w", we.Version, err)
		}
		e := fsm.AuditEntry{Version: we.Version, Act: fsm.Act{At: we.At, By: we.By}, Kind: kind, Tier: we.Tier, OnRaise: bucket.OnRaise(we.OnRaise)}
		if we.Before != nil {
			e.Before = new(we.Before.policy())
		}
		if we.After != nil {
			e.After = new(we.After.policy())
		}
		p.Entries = append(p.Entries, e)
	}
	return p, nil
}
