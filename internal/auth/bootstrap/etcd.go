package bootstrap

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// EtcdStore is Store on an etcd v3 client; knode server passes the client
// of its storage (etcd.Store.Client), embedded or external. Reads are
// linearizable (clientv3's default).
type EtcdStore struct {
	// Client is used, not owned: EtcdStore never closes it.
	Client *clientv3.Client
}

var _ Store = EtcdStore{}

// Get implements Store.
func (s EtcdStore) Get(ctx context.Context, key string) ([]byte, bool, error) {
	resp, err := s.Client.Get(ctx, key)
	if err != nil {
		return nil, false, err
	}
	if len(resp.Kvs) == 0 {
		return nil, false, nil
	}
	return resp.Kvs[0].Value, true, nil
}

// CreateIfAbsent implements Store with one transaction: put if the key's
// CreateRevision is 0, that is, if it does not exist.
func (s EtcdStore) CreateIfAbsent(ctx context.Context, key string, value []byte) (bool, error) {
	resp, err := s.Client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(value))).
		Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}
