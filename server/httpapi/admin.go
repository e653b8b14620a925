package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/cluster"
	"github.com/quorate/quorate/fsm"
	"github.com/quorate/quorate/server/answer"
)

// serviceFunc is the handler of a route that calls the Service; ctx is the
// request's context with the call's deadline (see callContext), canceled
// when the handler returns.
type serviceFunc func(ctx context.Context, w http.ResponseWriter, r *http.Request) error

// withDeadline adapts h to a route handler. It refuses the request if check
// (when not nil) refuses its path, then if its api.HeaderTimeout is bad, in
// that order, before h sees it.
func (s *Server) withDeadline(check func(r *http.Request) error, h serviceFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if check != nil {
			if err := check(r); err != nil {
				return err
			}
		}
		ctx, cancel, err := s.callContext(r)
		if err != nil {
			return err
		}
		defer cancel()
		return h(ctx, w, r)
	}
}

// checkClientPath refuses an invalid {client} path value.
func checkClientPath(r *http.Request) error {
	return checkClient(r.PathValue("client"), "client (path)")
}

// checkTierPath refuses an invalid {tier} path value.
func checkTierPath(r *http.Request) error {
	if err := bucket.ValidateTierName(r.PathValue("tier")); err != nil {
		return badRequest(api.CodeInvalidTierName, "tier (path): %v", err)
	}
	return nil
}

// getClient answers GET /v1/clients/{client}.
func (s *Server) getClient(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	v, err := s.svc.Client(ctx, r.PathValue("client"))
	if err != nil {
		return err
	}
	s.writeJSON(w, http.StatusOK, api.ClientResponse{
		Client:         v.Client,
		Tier:           v.Tier,
		AssignedTier:   v.AssignedTier,
		Policy:         api.PolicyToJSON(v.Policy),
		Remaining:      v.Decision.RemainingTokens(),
		RemainingExact: bucket.FormatRate(v.Decision.Remaining), // nanotokens as an exact decimal
		RetryAfterMs:   answer.CeilDiv(v.Decision.RetryAfter, int64(time.Millisecond)),
		ResetAfterMs:   answer.CeilDiv(v.Decision.ResetAfter, int64(time.Millisecond)),
		Known:          v.Known,
		StampUnixNano:  v.At,
		LastAssigned:   assignmentJSON(v.Record),
		LastReset:      actJSON(v.Record.Reset),
	})
	return nil
}

// setClientTier answers PUT /v1/clients/{client}/tier once the assignment
// is applied. The tier need not exist: a client of a missing tier is decided
// under the default policy until the tier is created.
func (s *Server) setClientTier(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	client := r.PathValue("client")
	tier, err := readAndDecode(s, r, s.opts.MaxBodyBytes, decodeSetTier)
	if err != nil {
		return err
	}
	if err := s.svc.SetClientTier(ctx, client, tier, actorOf(r)); err != nil {
		return err
	}
	s.writeJSON(w, http.StatusOK, api.ClientTierResponse{Client: client, Tier: tier})
	return nil
}

// resetClient answers POST /v1/clients/{client}/reset: the client's bucket
// is forgotten (full at its next decision), its tier assignment kept. 409
// cluster_version while a node of the release before may hold a replica.
func (s *Server) resetClient(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	client := r.PathValue("client")
	had, err := s.svc.ResetClient(ctx, client, actorOf(r))
	if err != nil {
		return err
	}
	s.writeJSON(w, http.StatusOK, api.ResetResponse{Client: client, HadBucket: had})
	return nil
}

// removeClientTier answers DELETE /v1/clients/{client}/tier; removing an
// assignment that does not exist succeeds.
func (s *Server) removeClientTier(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	client := r.PathValue("client")
	if err := s.svc.SetClientTier(ctx, client, "", actorOf(r)); err != nil {
		return err
	}
	s.writeJSON(w, http.StatusOK, api.ClientTierResponse{Client: client})
	return nil
}

// putTier answers PUT /v1/tiers/{tier}: 200 once every group applied the
// change, 202 if some had not by the deadline (listed in "lagging"; they
// will apply it when they can).
func (s *Server) putTier(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	return s.changePolicy(ctx, w, r, fsm.OpSetTier, r.PathValue("tier"))
}

// putDefault answers PUT /v1/default like putTier; an invalid default is
// refused with 400 and changes nothing.
func (s *Server) putDefault(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	return s.changePolicy(ctx, w, r, fsm.OpSetDefault, "")
}

func (s *Server) changePolicy(ctx context.Context, w http.ResponseWriter, r *http.Request, kind fsm.ConfigOpKind, tier string) error {
	op, err := readAndDecode(s, r, s.opts.MaxBodyBytes, decodePolicy)
	if err != nil {
		return err
	}
	op.Kind, op.Tier, op.Actor = kind, tier, actorOf(r)
	cc, err := s.svc.ChangeConfig(ctx, op)
	if err != nil {
		return err
	}
	s.writeConfigChange(w, cc)
	return nil
}

// deleteTier answers DELETE /v1/tiers/{tier}: 200/202 like putTier, 404
// tier_not_found if there is no such tier. Clients assigned to it fall back
// to the default policy.
func (s *Server) deleteTier(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	cc, err := s.svc.ChangeConfig(ctx, fsm.ConfigOp{Kind: fsm.OpDeleteTier, Tier: r.PathValue("tier"), Audited: fsm.Audited{Actor: actorOf(r)}})
	if err != nil {
		return err
	}
	s.writeConfigChange(w, cc)
	return nil
}

func (s *Server) writeConfigChange(w http.ResponseWriter, out api.ConfigChange) {
	if out.Applied == nil {
		out.Applied = []string{}
	}
	status := http.StatusOK
	if len(out.Lagging) > 0 {
		status = http.StatusAccepted
	}
	s.writeJSON(w, status, out)
}

// getTiers answers GET /v1/tiers.
func (s *Server) getTiers(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	cfg, err := s.svc.Config(ctx)
	if err != nil {
		return err
	}
	out := api.TiersResponse{Version: cfg.Version, Default: api.PolicyToJSON(cfg.Default), Tiers: make(map[string]api.Policy, len(cfg.Tiers))}
	for name, p := range cfg.Tiers {
		out.Tiers[name] = api.PolicyToJSON(p)
	}
	s.writeJSON(w, http.StatusOK, out)
	return nil
}

// getCluster answers GET /v1/cluster with the node's view.
func (s *Server) getCluster(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	st, err := s.svc.Status(ctx)
	if err != nil {
		return err
	}
	s.writeJSON(w, http.StatusOK, st)
	return nil
}

// healthz answers GET /healthz: 200 {"status":"ok"} whenever the process
// serves HTTP. It does not consult the cluster.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) error {
	s.writeJSON(w, http.StatusOK, api.StatusResponse{Status: "ok"})
	return nil
}

// readyz answers GET /readyz: 200 {"status":"ready"} when every group has a
// leader, else 503 not_ready (shutting_down while stopping) with the
// reason, for operators and load balancers.
func (s *Server) readyz(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	if err := s.svc.Ready(ctx); err != nil {
		if errors.Is(err, cluster.ErrShuttingDown) {
			return err
		}
		return newError(api.CodeNotReady, err.Error())
	}
	s.writeJSON(w, http.StatusOK, api.StatusResponse{Status: "ready"})
	return nil
}

// getRoutes answers GET /v1/routes from the node's own view, without a
// round trip: it is meant to be polled.
func (s *Server) getRoutes(w http.ResponseWriter, r *http.Request) error {
	rt := s.svc.Routes()
	out := api.RoutesResponse{Groups: rt.Groups, Hash: api.RoutesHash, Version: rt.Version, Leaders: make(map[string]string, len(rt.Leaders))}
	for g, addr := range rt.Leaders {
		out.Leaders[strconv.Itoa(g)] = s.opts.Scheme + "://" + addr
	}
	s.writeJSON(w, http.StatusOK, out)
	return nil
}
