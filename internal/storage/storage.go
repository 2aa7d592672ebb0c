// Package storage defines the key-value contract that knode's API server keeps
// its objects in, and the errors callers branch on.
//
// Keys are strings such as "/registry/nodes/node-1"; values are opaque bytes
// (the API server stores protobuf as kube-apiserver does, JSON for types
// without protobuf code). Every write advances one store-wide revision,
// and each key remembers the revision of its last write (ModRevision), which
// the API server exposes as metadata.resourceVersion.
//
// What an implementation owns: atomic compare-and-swap on ModRevision, a
// consistent revision for every read, ordered watch events from any revision
// that has not been compacted, and durability of every acknowledged write
// (for the etcd implementation: a write that returned survives kill -9).
//
// What it deliberately does not do: it knows nothing of objects, namespaces,
// selectors or encodings. Filtering, decoding and fan-out to many watchers
// belong to the API server.
package storage

import (
	"context"
	"errors"
)

// Sentinel errors. Implementations wrap them with %w; callers test with
// errors.Is.
var (
	// ErrNotFound: the key does not exist (get, update, delete).
	ErrNotFound = errors.New("storage: key not found")
	// ErrExists: create found the key already present.
	ErrExists = errors.New("storage: key already exists")
	// ErrConflict: the key's ModRevision did not match the expected one.
	ErrConflict = errors.New("storage: revision conflict")
	// ErrCompacted: the requested revision has been compacted away.
	ErrCompacted = errors.New("storage: revision compacted")
	// ErrFutureRevision: a read or watch asked for a revision the store has
	// not reached yet.
	ErrFutureRevision = errors.New("storage: revision not yet reached")
	// ErrInvalidContinue: a continue token that this store did not issue or
	// cannot decode.
	ErrInvalidContinue = errors.New("storage: invalid continue token")
	// ErrUnavailable: the store cannot serve the request now, e.g. an etcd
	// member without a leader (its cluster has lost its quorum); a later
	// attempt may succeed.
	ErrUnavailable = errors.New("storage: unavailable")
)

// KV is one stored key with its value and revisions.
type KV struct {
	Key   string
	Value []byte
	// CreateRevision is the revision of the write that created the key.
	CreateRevision int64
	// ModRevision is the revision of the key's last write.
	ModRevision int64
}

// ListOptions narrows a List.
type ListOptions struct {
	// Revision reads the prefix as of that revision; 0 means the latest.
	// A compacted revision gives ErrCompacted.
	Revision int64
	// Limit caps the number of items; 0 means no limit.
	Limit int64
	// Continue resumes a list from a token returned by an earlier List of
	// the same prefix. The continued list reads at the revision of the
	// first page, so pages are consistent with each other.
	Continue string
}

// ListResult is one page of a List.
type ListResult struct {
	// Items in ascending key order.
	Items []KV
	// Revision the page was read at (the store revision for a fresh list).
	Revision int64
	// Continue is non-empty when more items remain.
	Continue string
	// RemainingItemCount is the number of items after this page, when known
	// (only set when Continue is non-empty); nil when unknown.
	RemainingItemCount *int64
}

// EventType is the kind of change a watch event reports.
type EventType int

const (
	Put EventType = iota + 1 // created or updated
	Delete
)

// Event is one change seen by a watch.
type Event struct {
	Type EventType
	// KV is the key after the change. For Delete, Value is the value just
	// before the deletion and ModRevision is the revision of the deletion.
	KV KV
	// PrevValue is the value before the change (nil on create).
	PrevValue []byte
	// Created is true when a Put created the key.
	Created bool
}

// Watcher delivers events in revision order until it is stopped or fails.
type Watcher interface {
	// Events is closed when the watch ends; Err then says why (nil after
	// Stop or context cancellation).
	Events() <-chan Event
	Err() error
	Stop()
}

// Interface is the store. All methods are safe for concurrent use and block
// until the store answers or ctx ends.
type Interface interface {
	// Create writes a new key and returns its revision; ErrExists if present.
	Create(ctx context.Context, key string, value []byte) (int64, error)
	// Get reads one key at the latest revision; ErrNotFound if absent.
	Get(ctx context.Context, key string) (KV, error)
	// List reads every key that starts with prefix.
	List(ctx context.Context, prefix string, opts ListOptions) (ListResult, error)
	// Update replaces the value if the key's ModRevision equals expected
	// (expected 0 means unconditional) and returns the new revision.
	// ErrNotFound if the key is absent, ErrConflict on a mismatch.
	Update(ctx context.Context, key string, value []byte, expected int64) (int64, error)
	// Delete removes the key if its ModRevision equals expected (0 means
	// unconditional) and returns the deleted KV with ModRevision set to the
	// revision of the deletion.
	Delete(ctx context.Context, key string, expected int64) (KV, error)
	// Watch reports every change under prefix after revision fromRevision
	// (0 means from now). A compacted fromRevision gives ErrCompacted,
	// either at once or through Watcher.Err.
	Watch(ctx context.Context, prefix string, fromRevision int64) (Watcher, error)
	// Revision is the store's current revision.
	Revision(ctx context.Context) (int64, error)
	// Compact discards history before revision.
	Compact(ctx context.Context, revision int64) error
	// Close releases the store.
	Close() error
}
