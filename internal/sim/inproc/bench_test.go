package inproc_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"knode/internal/apitest"
	"knode/internal/sim/inproc"
)

func BenchmarkLeaseUpdate(b *testing.B) {
	for _, ct := range []string{"json", "protobuf"} {
		b.Run(ct, func(b *testing.B) {
			s := apitest.Start(b, apitest.Options{})
			cfg := &rest.Config{Host: "http://inproc", BearerToken: apitest.AdminToken, QPS: -1, Transport: &inproc.Transport{Handler: s.API}}
			if ct == "protobuf" {
				cfg.ContentType = "application/vnd.kubernetes.protobuf"
				cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
			}
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			leases := cs.CoordinationV1().Leases("kube-node-lease")
			name := "n1"
			now := metav1.NewMicroTime(time.Unix(1700000000, 0))
			l, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To(int32(40)), RenewTime: &now}}, metav1.CreateOptions{})
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t := metav1.NewMicroTime(time.Unix(1700000000+int64(i), 0))
				l.Spec.RenewTime = &t
				l, err = leases.Update(ctx, l, metav1.UpdateOptions{})
				if err != nil {
					b.Fatal(fmt.Errorf("update %d: %w", i, err))
				}
			}
		})
	}
}
