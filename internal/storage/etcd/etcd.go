// Package etcd implements storage.Interface on etcd v3, either embedded in
// this process (NewEmbedded) or as a client of an external cluster
// (NewClient).
//
// What it owns: mapping the storage contract onto etcd transactions (create,
// compare-and-swap update and delete), ranged reads with continue tokens,
// watches, and compaction; and, for the embedded server, starting it with
// durable settings (fsync stays on) and an exclusive lock on its data
// directory, either as a lone member with no listening socket at all, or as
// a member of a cluster of embedded servers (EmbeddedConfig.Peer): peer
// traffic over mutual TLS from one CA, membership changes (Members,
// AddMember, RemoveMember) under etcd's strict quorum check, and telling a
// removed member's data directory apart (ErrMemberRemoved).
//
// What callers must do: Close the Store, which also stops an embedded
// server. Keys are used as given, so several knode clusters sharing one
// external etcd must use different key prefixes. For a cluster: make the
// certificates, give NewEmbedded a deadline, and carry AddMember's answer to
// the joining member (the join protocol is the caller's). To replace a dead
// member, remove it first, then add the new one.
//
// What it does not do: compact by itself (see storage.Compactor; etcd's own
// auto-compaction is left off), retry failed writes or refused membership
// changes, cache reads, add learners, or remove dead members by itself.
package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"knode/internal/storage"
)

// Store is storage.Interface over an etcd v3 client.
type Store struct {
	client *clientv3.Client
	// requireLeader makes watches fail when the member they use loses its
	// leader, instead of going silent; for external clusters.
	requireLeader bool
	// onClose runs after the client is closed (stops an embedded server).
	onClose   func()
	closeOnce sync.Once
	closeErr  error
}

var _ storage.Interface = (*Store)(nil)

// Client returns the underlying etcd client, for callers that need etcd
// itself (benchmarks, maintenance). It is closed by Close.
func (s *Store) Client() *clientv3.Client { return s.client }

// leaderCtx is ctx with etcd's require-leader flag when the store asks for
// it: a member without a leader then refuses the request at once ("etcdserver:
// no leader") instead of queueing it until etcd's request timeout, which the
// client's retries of a read turn into a wait of minutes.
func (s *Store) leaderCtx(ctx context.Context) context.Context {
	if s.requireLeader {
		return clientv3.WithRequireLeader(ctx)
	}
	return ctx
}

// mapError turns etcd's errors into the storage sentinels where one fits.
func mapError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, rpctypes.ErrCompacted), errors.Is(err, rpctypes.ErrGRPCCompacted):
		return fmt.Errorf("%w: %v", storage.ErrCompacted, err)
	case errors.Is(err, rpctypes.ErrFutureRev), errors.Is(err, rpctypes.ErrGRPCFutureRev):
		return fmt.Errorf("%w: %v", storage.ErrFutureRevision, err)
	case errors.Is(err, rpctypes.ErrNoLeader), errors.Is(err, rpctypes.ErrGRPCNoLeader),
		errors.Is(err, rpctypes.ErrTimeout), errors.Is(err, rpctypes.ErrGRPCTimeout),
		errors.Is(err, rpctypes.ErrTimeoutDueToLeaderFail), errors.Is(err, rpctypes.ErrGRPCTimeoutDueToLeaderFail),
		errors.Is(err, rpctypes.ErrTimeoutDueToConnectionLost), errors.Is(err, rpctypes.ErrGRPCTimeoutDueToConnectionLost):
		return fmt.Errorf("%w: etcd: %v", storage.ErrUnavailable, err)
	}
	if st, ok := status.FromError(err); ok && st.Code() == codes.Unavailable {
		// The connection to the member broke (it died, or is restarting).
		return fmt.Errorf("%w: etcd: %v", storage.ErrUnavailable, err)
	}
	return fmt.Errorf("etcd: %w", err)
}

func toKV(kv *mvccpb.KeyValue) storage.KV {
	return storage.KV{
		Key:            string(kv.Key),
		Value:          kv.Value,
		CreateRevision: kv.CreateRevision,
		ModRevision:    kv.ModRevision,
	}
}

// Create implements storage.Interface.
func (s *Store) Create(ctx context.Context, key string, value []byte) (int64, error) {
	resp, err := s.client.Txn(s.leaderCtx(ctx)).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(value))).
		Commit()
	if err != nil {
		return 0, mapError(err)
	}
	if !resp.Succeeded {
		return 0, fmt.Errorf("%w: %q", storage.ErrExists, key)
	}
	return resp.Header.Revision, nil
}

// Get implements storage.Interface.
func (s *Store) Get(ctx context.Context, key string) (storage.KV, error) {
	resp, err := s.client.Get(s.leaderCtx(ctx), key)
	if err != nil {
		return storage.KV{}, mapError(err)
	}
	if len(resp.Kvs) == 0 {
		return storage.KV{}, fmt.Errorf("%w: %q", storage.ErrNotFound, key)
	}
	return toKV(resp.Kvs[0]), nil
}

// precondition is the compare a conditional write needs: the key's
// ModRevision equals expected, or, when expected is 0, the key exists.
func precondition(key string, expected int64) clientv3.Cmp {
	if expected == 0 {
		return clientv3.Compare(clientv3.CreateRevision(key), ">", 0)
	}
	return clientv3.Compare(clientv3.ModRevision(key), "=", expected)
}

// failedPrecondition explains why a conditional write did not happen, from
// the Get the transaction ran in its else branch.
func failedPrecondition(key string, expected int64, resp *clientv3.TxnResponse) error {
	if len(resp.Responses) == 1 {
		if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) == 1 {
			return fmt.Errorf("%w: %q is at revision %d, not %d", storage.ErrConflict, key, kvs[0].ModRevision, expected)
		}
	}
	return fmt.Errorf("%w: %q", storage.ErrNotFound, key)
}

// Update implements storage.Interface.
func (s *Store) Update(ctx context.Context, key string, value []byte, expected int64) (int64, error) {
	resp, err := s.client.Txn(s.leaderCtx(ctx)).
		If(precondition(key, expected)).
		Then(clientv3.OpPut(key, string(value))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return 0, mapError(err)
	}
	if !resp.Succeeded {
		return 0, failedPrecondition(key, expected, resp)
	}
	return resp.Header.Revision, nil
}

// Delete implements storage.Interface.
func (s *Store) Delete(ctx context.Context, key string, expected int64) (storage.KV, error) {
	resp, err := s.client.Txn(s.leaderCtx(ctx)).
		If(precondition(key, expected)).
		Then(clientv3.OpDelete(key, clientv3.WithPrevKV())).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return storage.KV{}, mapError(err)
	}
	if !resp.Succeeded {
		return storage.KV{}, failedPrecondition(key, expected, resp)
	}
	prev := resp.Responses[0].GetResponseDeleteRange().GetPrevKvs()
	if len(prev) != 1 {
		// The compare saw the key inside the same transaction, so this
		// cannot happen short of an etcd bug.
		return storage.KV{}, fmt.Errorf("etcd: delete of %q returned %d previous values", key, len(prev))
	}
	kv := toKV(prev[0])
	kv.ModRevision = resp.Header.Revision
	return kv, nil
}

// prefixEnd is the first key after every key that starts with prefix, or
// "\x00" (etcd's "to the end of the keyspace") when there is none.
func prefixEnd(prefix string) string {
	return clientv3.GetPrefixRangeEnd(prefix)
}

// List implements storage.Interface. Pages after the first read at the first
// page's revision, so a page fails with ErrCompacted once that revision is
// compacted.
func (s *Store) List(ctx context.Context, prefix string, opts storage.ListOptions) (storage.ListResult, error) {
	if opts.Limit < 0 {
		return storage.ListResult{}, fmt.Errorf("storage: limit %d must not be negative", opts.Limit)
	}
	if opts.Revision < 0 {
		return storage.ListResult{}, fmt.Errorf("storage: revision %d must not be negative", opts.Revision)
	}
	start, rev := prefix, opts.Revision
	if opts.Continue != "" {
		lastKey, tokenRev, err := storage.DecodeContinue(opts.Continue, prefix)
		if err != nil {
			return storage.ListResult{}, err
		}
		if rev != 0 && rev != tokenRev {
			return storage.ListResult{}, fmt.Errorf("%w: token reads at revision %d, options ask for %d", storage.ErrInvalidContinue, tokenRev, rev)
		}
		start, rev = lastKey+"\x00", tokenRev
	}
	if start == "" {
		start = "\x00" // etcd has no empty key; this is the first one
	}
	ops := []clientv3.OpOption{clientv3.WithRange(prefixEnd(prefix))}
	if rev != 0 {
		ops = append(ops, clientv3.WithRev(rev))
	}
	if opts.Limit > 0 {
		ops = append(ops, clientv3.WithLimit(opts.Limit))
	}
	resp, err := s.client.Get(s.leaderCtx(ctx), start, ops...)
	if err != nil {
		return storage.ListResult{}, mapError(err)
	}
	if rev == 0 {
		rev = resp.Header.Revision
	}
	res := storage.ListResult{Revision: rev, Items: make([]storage.KV, 0, len(resp.Kvs))}
	for _, kv := range resp.Kvs {
		res.Items = append(res.Items, toKV(kv))
	}
	if resp.More && len(res.Items) > 0 {
		res.Continue = storage.EncodeContinue(res.Items[len(res.Items)-1].Key, rev)
		// Count is every key from start to the end of the prefix.
		remaining := resp.Count - int64(len(res.Items))
		res.RemainingItemCount = &remaining
	}
	return res, nil
}

// Revision implements storage.Interface with a linearizable read, so the
// answer is at least every revision acknowledged before the call.
func (s *Store) Revision(ctx context.Context) (int64, error) {
	// Any key will do: the header carries the store revision.
	resp, err := s.client.Get(s.leaderCtx(ctx), "\x00", clientv3.WithCountOnly())
	if err != nil {
		return 0, mapError(err)
	}
	return resp.Header.Revision, nil
}

// Compact implements storage.Interface. etcd refuses a revision at or below
// the last compaction (ErrCompacted) or above the store (ErrFutureRevision).
// The compaction is logical at once; etcd frees the space in the background.
func (s *Store) Compact(ctx context.Context, revision int64) error {
	_, err := s.client.Compact(s.leaderCtx(ctx), revision)
	return mapError(err)
}

// Close closes the client and, for an embedded store, stops the server.
// Only the first call does anything.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		err := s.client.Close()
		// The client reports context.Canceled for its own shutdown; that
		// is not a failure.
		if err != nil && !errors.Is(err, context.Canceled) {
			s.closeErr = fmt.Errorf("etcd: closing client: %w", err)
		}
		if s.onClose != nil {
			s.onClose()
		}
	})
	return s.closeErr
}
