package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"knode/internal/controller/volume/attachdetach"
	"knode/internal/controller/volume/csiattacher"
	"knode/internal/controller/volume/csiprovisioner"
	"knode/internal/controller/volume/persistentvolume"
	"knode/internal/controller/volume/protection"
	"knode/internal/csi/hostpath"
	"knode/internal/volume"
)

// DefaultStorageDir is where the built-in CSI driver keeps its volumes
// unless told otherwise; the server and every agent must see the same
// directory (one machine, or a shared mount).
const DefaultStorageDir = "/var/lib/knode/storage"

// DefaultStorageClass is the name of the StorageClass the server installs
// for the built-in driver.
const DefaultStorageClass = "standard"

// StorageConfig configures the storage controllers and the built-in CSI
// driver's controller side.
type StorageConfig struct {
	// DisableForceDetachOnTimeout is --disable-force-detach-on-timeout.
	DisableForceDetachOnTimeout bool
	// DisableBuiltinDriver turns off the built-in driver's controller side,
	// its attacher and provisioner, and the CSIDriver and StorageClass the
	// server installs for it (--builtin-storage=false).
	DisableBuiltinDriver bool
	// DataDir is the built-in driver's data directory; empty means
	// DefaultStorageDir.
	DataDir string
}

// startVolumes starts the PV, protection and attach/detach controllers
// and, unless it is disabled, the built-in CSI driver's controller side
// with the attacher and provisioner that serve it, all in t.
func startVolumes(t *term) error {
	client, cfg, log := t.client, t.cfg, t.log
	factory := informers.NewSharedInformerFactory(client, 0)
	pv, err := persistentvolume.New(persistentvolume.Config{Client: client, Clock: cfg.Clock, Informers: factory, Logger: log})
	if err != nil {
		return err
	}
	prot, err := protection.New(protection.Config{Client: client, Clock: cfg.Clock, Informers: factory, Logger: log})
	if err != nil {
		return err
	}
	ad, err := attachdetach.New(attachdetach.Config{
		Client: client, Clock: cfg.Clock, Logger: log, Metrics: t.metrics, Informers: factory,
		DisableForceDetachOnTimeout: cfg.Storage.DisableForceDetachOnTimeout,
	})
	if err != nil {
		return err
	}
	t.run(func() { pv.Run(t.ctx) })
	t.run(func() { prot.Run(t.ctx) })
	t.run(func() { ad.Run(t.ctx) })
	if cfg.Storage.DisableBuiltinDriver {
		return nil
	}
	return startBuiltinDriver(t, factory)
}

// startBuiltinDriver serves the built-in driver's controller service on a
// socket in the data dir, and attaches and provisions for it, in t.
func startBuiltinDriver(t *term, factory informers.SharedInformerFactory) error {
	client, cfg, log := t.client, t.cfg, t.log
	dataDir := cfg.Storage.DataDir
	if dataDir == "" {
		dataDir = DefaultStorageDir
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return fmt.Errorf("storage data dir: %w", err)
	}
	driver, err := hostpath.New(hostpath.Config{DataDir: dataDir, Clock: cfg.Clock, Logger: log})
	if err != nil {
		return err
	}
	sock := filepath.Join(cfg.DataDir, "csi.sock")
	srv, err := driver.Start(sock, hostpath.Controller)
	if err != nil {
		return fmt.Errorf("starting the built-in CSI driver: %w", err)
	}
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		srv.Stop()
		return err
	}
	t.run(func() {
		<-t.ctx.Done()
		conn.Close()
		srv.Stop()
	})
	att, err := csiattacher.New(csiattacher.Config{Driver: volume.BuiltinDriver, Conn: conn, Client: client, Clock: cfg.Clock, Informers: factory, Logger: log})
	if err != nil {
		return err
	}
	prov, err := csiprovisioner.New(csiprovisioner.Config{Driver: volume.BuiltinDriver, Conn: conn, Client: client, Clock: cfg.Clock, Informers: factory, Logger: log})
	if err != nil {
		return err
	}
	t.run(func() { att.Run(t.ctx) })
	t.run(func() { prov.Run(t.ctx) })
	return nil
}

// installBuiltinStorage creates the built-in driver's CSIDriver and the
// default StorageClass unless they exist; what a user changed in them is
// kept.
func installBuiltinStorage(ctx context.Context, client kubernetes.Interface) error {
	driver := &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: volume.BuiltinDriver, Labels: map[string]string{"app.kubernetes.io/managed-by": "knode"}},
		Spec: storagev1.CSIDriverSpec{
			AttachRequired:       ptr.To(true),
			PodInfoOnMount:       ptr.To(false),
			VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent},
		},
	}
	if _, err := client.StorageV1().CSIDrivers().Create(ctx, driver, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating CSIDriver %s: %w", driver.Name, err)
	}
	class := &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{
			Name:        DefaultStorageClass,
			Annotations: map[string]string{volume.AnnDefaultStorageClass: "true"},
			Labels:      map[string]string{"app.kubernetes.io/managed-by": "knode"},
		},
		Provisioner:       volume.BuiltinDriver,
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
	}
	if _, err := client.StorageV1().StorageClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating StorageClass %s: %w", class.Name, err)
	}
	return nil
}
