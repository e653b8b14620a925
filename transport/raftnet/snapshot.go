package raftnet

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/hashicorp/raft"

	"github.com/quorate/quorate/internal/binenc"
)

// A snapshot travels on a stream of its own: after the preamble, one frame
// holding the group's name and the InstallSnapshotRequest, then exactly
// Size bytes of data; the answer is one response frame (seq 0).

// snapshotTimeout is how long a snapshot of size bytes may take: Timeout
// per TimeoutScale bytes, at least Timeout.
func (n *Net) snapshotTimeout(size int64) time.Duration {
	return max(n.opts.Timeout, n.opts.Timeout*time.Duration(size/TimeoutScale))
}

// InstallSnapshot implements raft.Transport.
func (t *Transport) InstallSnapshot(_ raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	n := t.net
	ctx, cancel := context.WithTimeout(context.Background(), n.opts.DialTimeout)
	conn, err := n.layer.DialContext(ctx, "tcp", string(target))
	cancel()
	if err != nil {
		return fmt.Errorf("raftnet: dial %s: %w", target, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(n.snapshotTimeout(args.Size)))
	// Closing the group's transport or the Net ends the transfer at once,
	// as it ends every other call.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-t.done:
		case <-n.done:
		case <-stop:
			return
		}
		conn.Close()
	}()

	bw := bufio.NewWriterSize(conn, 64<<10)
	frame := binenc.AppendString([]byte{0, 0, 0, 0}, t.group)
	frame = endFrame(appendInstallSnapshotRequest(frame, args))
	if _, err := bw.Write(preamble(streamSnap)); err != nil {
		return err
	}
	if _, err := bw.Write(frame); err != nil {
		return err
	}
	// The request goes ahead of the data, so the peer's raft can check it
	// (and start reading) while the data streams.
	if err := bw.Flush(); err != nil {
		return err
	}
	if _, err := io.CopyN(bw, data, args.Size); err != nil {
		return fmt.Errorf("raftnet: snapshot data: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return err
	}

	body, err := readFrame(bufio.NewReader(conn), nil, n.opts.MaxFrame)
	if err != nil {
		return fmt.Errorf("raftnet: snapshot answer from %s: %w", target, err)
	}
	_, status, body, err := parseResponse(body)
	switch {
	case err != nil:
		return err
	case status == statusError:
		return &RemoteError{Msg: string(body)}
	}
	r := &binenc.Reader{B: body}
	readInstallSnapshotResponse(r, resp)
	return finish(r)
}

// serveSnapshot reads one snapshot stream and hands it to its group's raft.
func (n *Net) serveSnapshot(conn net.Conn, br *bufio.Reader) {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		conn.Close()
		return
	}
	n.snapshots[conn] = struct{}{} // Net.Close closes it
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		delete(n.snapshots, conn)
		n.mu.Unlock()
		conn.Close()
	}()
	_ = conn.SetDeadline(time.Now().Add(n.opts.Timeout))
	b, err := readFrame(br, nil, n.opts.MaxFrame)
	if err != nil {
		return
	}
	r := &binenc.Reader{B: b}
	group := r.Str(maxName)
	req := readInstallSnapshotRequest(r)
	answer := func(frame []byte) { _, _ = conn.Write(frame) }
	if err := finish(r); err != nil {
		answer(errorResponse(0, err))
		return
	}
	t := n.group(group)
	if t == nil {
		answer(errorResponse(0, fmt.Errorf("raftnet: no group %q on %s", group, n.local)))
		return
	}
	_ = conn.SetDeadline(time.Now().Add(n.snapshotTimeout(req.Size)))
	respCh := make(chan raft.RPCResponse, 1)
	select {
	case t.consumer <- raft.RPC{Command: req, Reader: io.LimitReader(br, req.Size), RespChan: respCh}:
	case <-t.done:
		answer(errorResponse(0, raft.ErrTransportShutdown))
		return
	}
	select {
	case res := <-respCh:
		if res.Error != nil {
			answer(errorResponse(0, res.Error))
			return
		}
		m, ok := res.Response.(*raft.InstallSnapshotResponse)
		if !ok {
			answer(errorResponse(0, fmt.Errorf("raftnet: raft answered a snapshot with %T", res.Response)))
			return
		}
		answer(endFrame(appendInstallSnapshotResponse(beginResponse(nil, 0, statusOK), m)))
	case <-t.done:
		answer(errorResponse(0, raft.ErrTransportShutdown))
	}
}
