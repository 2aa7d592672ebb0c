package volumes

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Teardown takes down the volumes of the pod uid, whose containers must
// have stopped: it unpublishes its CSI volumes, unstages those no other pod
// on the node uses (after which they leave InUse), unmounts and removes its
// emptyDirs, and removes its volume directories. It reports done once
// nothing of the pod's volumes is left; until then the caller calls again
// (err says what failed; it is retried at once, with no back-off). A pod
// the manager does not know is done. It works from what the manager
// recorded, so the pod object is not needed and may be gone.
func (m *Manager) Teardown(ctx context.Context, uid types.UID) (done bool, err error) {
	m.ops.Lock()
	defer m.ops.Unlock()
	defer m.refresh()
	return m.teardown(ctx, uid)
}

// Cleanup tears down the volumes of every pod that keep does not claim
// (the pods an earlier agent set up and the worker no longer runs), and
// unstages the volumes no pod uses. The caller calls it on every pass;
// with nothing to do it makes no calls.
func (m *Manager) Cleanup(ctx context.Context, keep func(types.UID) bool) error {
	m.ops.Lock()
	defer m.ops.Unlock()
	defer m.refresh()
	var errs []error
	for _, uid := range slices.Sorted(maps.Keys(m.pods)) {
		if keep(uid) {
			continue
		}
		if _, err := m.teardown(ctx, uid); err != nil {
			errs = append(errs, fmt.Errorf("pod %s: %w", uid, err))
		}
	}
	for _, unique := range slices.Sorted(maps.Keys(m.devices)) {
		if err := m.unstageUnused(ctx, unique); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (m *Manager) teardown(ctx context.Context, uid types.UID) (bool, error) {
	ps := m.pods[uid]
	if ps == nil {
		return true, nil
	}
	var errs []error
	for _, key := range slices.Sorted(maps.Keys(ps.vols)) {
		v := ps.vols[key]
		if err := m.teardownVolume(ctx, v); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(ps.vols, key)
	}
	if len(ps.vols) > 0 {
		return false, errors.Join(errs...)
	}
	m.removePodDirs(uid)
	for _, unique := range slices.Sorted(maps.Keys(ps.devices)) {
		if err := m.unstageUnused(ctx, unique); err != nil {
			errs = append(errs, err)
			continue
		}
		if _, staged := m.devices[unique]; !staged || m.users(unique) > 0 {
			delete(ps.devices, unique)
		}
	}
	if len(ps.devices) > 0 {
		return false, errors.Join(errs...)
	}
	delete(m.pods, uid)
	return true, errors.Join(errs...)
}

// teardownVolume takes down one volume of a pod.
func (m *Manager) teardownVolume(ctx context.Context, v *podVolume) error {
	switch v.kind {
	case kindCSI:
		if !v.recorded {
			return nil
		}
		if err := m.unpublish(ctx, v); err != nil {
			return fmt.Errorf("UnmountVolume.TearDown failed for volume %q : %w", v.pv, err)
		}
		m.log.Info("UnmountVolume.TearDown succeeded", "volume", v.pv, "path", v.path)
	case kindEmptyDir:
		if err := removeEmptyDir(v.path); err != nil {
			return fmt.Errorf("UnmountVolume.TearDown failed for volume %q : %w", filepath.Base(v.path), err)
		}
	case kindStray:
		if err := removeStray(v.path); err != nil {
			return fmt.Errorf("removing %s: %w", v.path, err)
		}
	}
	return nil
}

// users counts the pods with a volume on the device unique.
func (m *Manager) users(unique corev1.UniqueVolumeName) int {
	n := 0
	for _, ps := range m.pods {
		for _, v := range ps.vols {
			if v.kind == kindCSI && v.unique == unique {
				n++
				break
			}
		}
	}
	return n
}

// unstageUnused unstages the device unique when it is staged and no pod
// uses it.
func (m *Manager) unstageUnused(ctx context.Context, unique corev1.UniqueVolumeName) error {
	d := m.devices[unique]
	if d == nil || m.users(unique) > 0 {
		return nil
	}
	if err := m.unstage(ctx, d); err != nil {
		return fmt.Errorf("UnmountDevice failed for volume %q : %w", unique, err)
	}
	delete(m.devices, unique)
	m.log.Info("UnmountDevice succeeded", "volume", unique, "stagingPath", d.stagingPath)
	return nil
}

// removeEmptyDir unmounts an emptyDir's tmpfs, if any, and removes its
// directory.
func removeEmptyDir(path string) error {
	mounted, err := isMountPoint(path)
	if err != nil {
		return err
	}
	if mounted {
		if err := unmount(path); err != nil {
			return err
		}
		if mounted, err = isMountPoint(path); err != nil || mounted {
			return errors.Join(err, fmt.Errorf("%s is still mounted", path))
		}
	}
	if err := noMountsUnder(path); err != nil {
		return err
	}
	return os.RemoveAll(path)
}

// removeStray removes a directory found under a pod's volumes that
// nothing describes, unless something is mounted in it.
func removeStray(path string) error {
	if err := noMountsUnder(path); err != nil {
		return err
	}
	return os.RemoveAll(path)
}

// removePodDirs removes the pod's volumes directory and its plugin
// directories once they are empty, and the pod directory when nothing
// else is left in it. Failures leave directories behind, harmlessly.
func (m *Manager) removePodDirs(uid types.UID) {
	podDir := filepath.Join(m.cfg.RootDir, "pods", string(uid))
	volumesDir := filepath.Join(podDir, "volumes")
	entries, _ := os.ReadDir(volumesDir)
	for _, e := range entries {
		_ = os.Remove(filepath.Join(volumesDir, e.Name()))
	}
	_ = os.Remove(volumesDir)
	_ = os.Remove(podDir)
}
