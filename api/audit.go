package api

// The audit trail (README "Audit").

// Audit ops: what an AuditEntry changed.
const (
	AuditTierSet    = "tier_set"    // PUT /v1/tiers/{tier}
	AuditTierDelete = "tier_delete" // DELETE /v1/tiers/{tier}
	AuditDefaultSet = "default_set" // PUT /v1/default
)

// AuditEntry is one configuration change, as GET /v1/audit lists it.
type AuditEntry struct {
	// Version is the configuration version the change made.
	Version uint64 `json:"version"`
	// TimeUnixNano is when the meta group's leader committed the change,
	// by its clock.
	TimeUnixNano int64 `json:"time_unix_nano"`
	// Actor is the name of the API token that made the change, or
	// "anonymous" on a cluster without tokens.
	Actor string `json:"actor"`
	// Op is AuditTierSet, AuditTierDelete or AuditDefaultSet.
	Op string `json:"op"`
	// Tier is the tier changed, "default" for AuditDefaultSet.
	Tier string `json:"tier"`
	// Before and After are the policy before and after the change; null
	// for a tier that did not exist (created) or no longer does (deleted).
	Before *Policy `json:"before"`
	After  *Policy `json:"after"`
	// OnRaise is the change's on_raise ("keep" or "fill"; absent for a
	// deletion).
	OnRaise string `json:"on_raise,omitempty"`
}

// AuditResponse answers GET /v1/audit?since=VERSION&limit=N: the changes
// after version since, oldest first.
type AuditResponse struct {
	Entries []AuditEntry `json:"entries"`
	// More reports that there are changes after the last entry: ask again
	// with since set to its version.
	More bool `json:"more"`
	// OldestVersion is the version of the oldest change the trail still
	// holds (0 if none). When it is above since+1, the versions in between
	// are not in the trail: forgotten (it keeps the last 10,000 changes),
	// or never recorded (version 1, the configuration a cluster starts
	// with, and changes made below cluster version 2).
	OldestVersion uint64 `json:"oldest_version"`
}

// Act is an operator action on a client, in ClientResponse: when (the
// leader's clock, nanoseconds since the Unix epoch) and by whom (a token's
// name, or "anonymous").
type Act struct {
	TimeUnixNano int64  `json:"time_unix_nano"`
	Actor        string `json:"actor"`
}

// Assignment is a client's last tier assignment: an Act and the tier it
// assigned ("" for a removal, DELETE /v1/clients/{client}/tier).
type Assignment struct {
	Act
	Tier string `json:"tier"`
}
