package fsm

import "github.com/quorate/quorate/internal/binenc"

// TypeResetClient forgets one client's bucket (POST /v1/clients/{c}/reset),
// from ClusterVersionPolicies on: a node of the release before does not
// know the type.
const TypeResetClient Type = 9

// ResetClient forgets Client's bucket or window: its next decision finds
// it full (empty), as a client never seen. Its tier assignment and the
// decisions remembered for its request ids stay. Applying it twice is
// applying it once; with a Stamp, the group records it as the client's
// last reset (ClientRecord).
type ResetClient struct {
	Client string
	Audited
}

// Type is TypeResetClient.
func (ResetClient) Type() Type { return TypeResetClient }

func (r ResetClient) appendPayload(b []byte) []byte {
	return r.Audited.append(binenc.AppendString(b, r.Client))
}

func decodeResetClient(r *reader) (Command, error) {
	return ResetClient{Client: r.Str(maxFieldLen), Audited: r.audited()}, r.Err
}

// ResetResult is the result of a ResetClient: whether the group held a
// bucket for the client (false: it was full already).
type ResetResult struct {
	Existed bool
}

func (f *FSM) applyResetClient(r ResetClient) *ResetResult {
	if f.recording(r.Audited) {
		f.recordReset(r.Client, act(r.Audited))
	}
	return &ResetResult{Existed: f.forgetClient(r.Client)}
}
