package volumes

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/types"

	"knode/internal/volume"
)

// restore reads back the volumes an earlier agent left under the root
// dir: the staged CSI volumes (from the vol_data.json of each staging
// path), and each pod's emptyDirs and published CSI volumes. A volume
// whose mount is gone is kept as possibly mounted: Teardown still
// unpublishes it (the calls are idempotent) and Setup publishes it again.
// Called by New, before the Manager is shared.
func (m *Manager) restore() error {
	var errs []error
	stagings, _ := filepath.Glob(filepath.Join(m.cfg.RootDir, "plugins", volume.CSIPluginName, "*", "*", volDataFile))
	for _, f := range stagings {
		dir := filepath.Dir(f)
		data, err := readVolData(dir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		driver, handle := data[keyDriverName], data[keyVolumeHandle]
		if driver == "" || handle == "" {
			errs = append(errs, fmt.Errorf("%s: no driver or volume handle", f))
			continue
		}
		path := volume.StagingPath(m.cfg.RootDir, driver, handle)
		if filepath.Dir(path) != dir {
			errs = append(errs, fmt.Errorf("%s: names volume %s of %s, which stages elsewhere", f, handle, driver))
			continue
		}
		unique := volume.UniqueName(driver, handle)
		m.devices[unique] = &device{driver: driver, handle: handle, unique: unique, stagingPath: path, staged: true}
	}
	podDirs, err := os.ReadDir(filepath.Join(m.cfg.RootDir, "pods"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	for _, e := range podDirs {
		if !e.IsDir() {
			continue
		}
		uid := types.UID(e.Name())
		if err := m.restorePod(uid); err != nil {
			errs = append(errs, fmt.Errorf("pod %s: %w", uid, err))
		}
	}
	return errors.Join(errs...)
}

// restorePod reads back one pod's volumes directory.
func (m *Manager) restorePod(uid types.UID) error {
	volumesDir := filepath.Join(m.cfg.RootDir, "pods", string(uid), "volumes")
	plugins, err := os.ReadDir(volumesDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	ps := newPodState(uid)
	var errs []error
	for _, p := range plugins {
		dirs, err := os.ReadDir(filepath.Join(volumesDir, p.Name()))
		if err != nil {
			// Not a directory, or unreadable: nothing this manager made.
			continue
		}
		for _, d := range dirs {
			name := d.Name()
			path := filepath.Join(volumesDir, p.Name(), name)
			switch p.Name() {
			case emptyDirPluginDir:
				// Not ready until Setup sees it again: after a reboot a
				// Memory emptyDir's tmpfs is gone and must be mounted anew.
				ps.vols["empty-dir/"+name] = &podVolume{kind: kindEmptyDir, path: path, retry: newRetry()}
			case csiPluginDir:
				v, err := m.restoreCSI(uid, name, path)
				if err != nil {
					errs = append(errs, err)
					ps.vols["stray/"+p.Name()+"/"+name] = &podVolume{kind: kindStray, path: path, retry: newRetry()}
					continue
				}
				ps.vols["csi/"+name] = v
				ps.devices[v.unique] = true
			default:
				ps.vols["stray/"+p.Name()+"/"+name] = &podVolume{kind: kindStray, path: path, retry: newRetry()}
			}
		}
	}
	if len(ps.vols) > 0 {
		m.pods[uid] = ps
	}
	return errors.Join(errs...)
}

// restoreCSI reads back a published CSI volume from its directory (named
// after the PV) and its vol_data.json.
func (m *Manager) restoreCSI(uid types.UID, pv, dir string) (*podVolume, error) {
	data, err := readVolData(dir)
	if err != nil {
		return nil, err
	}
	driver, handle := data[keyDriverName], data[keyVolumeHandle]
	if driver == "" || handle == "" {
		return nil, fmt.Errorf("%s: no driver or volume handle", filepath.Join(dir, volDataFile))
	}
	target := volume.PublishPath(m.cfg.RootDir, uid, pv)
	mounted, err := isMountPoint(target)
	if err != nil {
		return nil, err
	}
	return &podVolume{
		kind:     kindCSI,
		path:     target,
		ready:    mounted,
		pv:       pv,
		driver:   driver,
		handle:   handle,
		unique:   volume.UniqueName(driver, handle),
		recorded: true,
		retry:    newRetry(),
	}, nil
}
