package hostpath

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"knode/internal/atomicfile"
)

// The data dir's layout:
//
//	<data>/lock                 flock'd around every read-modify-write
//	<data>/volumes/<id>/        a volume's content
//	<data>/meta/<id>.json       a volume's record (Volume)
//	<data>/nodes/<node>/node.json  a node's record (NodeRecord)
//	<data>/nodes/<node>/...     the node's mount records, unless
//	                            Config.NodeStateDir puts them elsewhere
//
// A volume exists when its record does. Records are replaced atomically,
// so a reader without the lock sees an old or a new record, never a torn
// one.
const (
	volumesDir = "volumes"
	metaDir    = "meta"
	nodesDir   = "nodes"
	lockFile   = "lock"
	nodeFile   = "node.json"
)

// store reads and writes the records in a data dir.
type store struct {
	root string
}

func (s store) volumeDir(id string) string { return filepath.Join(s.root, volumesDir, id) }
func (s store) metaPath(id string) string  { return filepath.Join(s.root, metaDir, id+".json") }
func (s store) nodePath(id string) string  { return filepath.Join(s.root, nodesDir, id, nodeFile) }

// init makes the data dir's directories.
func (s store) init() error {
	for _, d := range []string{s.root, filepath.Join(s.root, volumesDir), filepath.Join(s.root, metaDir), filepath.Join(s.root, nodesDir)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	return nil
}

// lock takes an flock on <dir>/lock, exclusive or shared, and returns the
// function that releases it. It blocks until the lock is free. flock works
// across processes and, on NFS, across machines (the client turns it into
// a byte-range lock on the server); each call opens its own file, so
// goroutines of one process exclude each other too.
func lockDir(dir string, exclusive bool) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	for {
		err = unix.Flock(int(f.Fd()), how)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return func() {
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}, nil
}

func (s store) lock(exclusive bool) (func(), error) { return lockDir(s.root, exclusive) }

// readJSON decodes the file at path into v; a missing file is ErrNotFound.
func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: %w", path, ErrNotFound)
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decode %s: %w", path, err)
	}
	return nil
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(path, append(data, '\n'), 0o600)
}

// volume reads the record of id; ErrNotFound when there is none (or id is
// not a handle of this driver).
func (s store) volume(id string) (*Volume, error) {
	if !validVolumeID(id) {
		return nil, fail(ErrNotFound, "volume %q does not exist", id)
	}
	var v Volume
	if err := readJSON(s.metaPath(id), &v); err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, fail(ErrNotFound, "volume %q does not exist", id)
		}
		return nil, err
	}
	return &v, nil
}

func (s store) putVolume(v Volume) error { return writeJSON(s.metaPath(v.ID), v) }

func (s store) removeVolumeRecord(id string) error {
	err := os.Remove(s.metaPath(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// volumes reads every record, sorted by ID. A record that vanishes while
// being read (a delete without the lock cannot happen, but a reader may
// hold none) is skipped.
func (s store) volumes() ([]Volume, error) {
	entries, err := os.ReadDir(filepath.Join(s.root, metaDir))
	if err != nil {
		return nil, err
	}
	var out []Volume
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !validVolumeID(id) {
			continue
		}
		v, err := s.volume(id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, *v)
	}
	slices.SortFunc(out, func(a, b Volume) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// makeVolumeDir makes the directory of a volume with mode 0777 (so that
// pods running as any user can write it, as with upstream's hostpath
// driver). fresh removes whatever is there first: the remains of a volume
// whose delete or create was cut short.
func (s store) makeVolumeDir(id string, fresh bool) error {
	dir := s.volumeDir(id)
	if fresh {
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o777); err != nil {
		if !errors.Is(err, fs.ErrExist) || fresh {
			return err
		}
	}
	return os.Chmod(dir, 0o777)
}

func (s store) removeVolumeDir(id string) error { return os.RemoveAll(s.volumeDir(id)) }

// node reads the record of node id; nil when it has none.
func (s store) node(id string) (*NodeRecord, error) {
	if !validNodeID(id) {
		return nil, nil
	}
	var n NodeRecord
	if err := readJSON(s.nodePath(id), &n); err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, nil
		}
		return nil, err
	}
	return &n, nil
}

func (s store) putNode(n NodeRecord) error {
	if err := os.MkdirAll(filepath.Dir(s.nodePath(n.NodeID)), 0o700); err != nil {
		return err
	}
	return writeJSON(s.nodePath(n.NodeID), n)
}
