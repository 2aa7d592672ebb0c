package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// podStartBatch is how many pods one measurement starts, one after the
// other.
const podStartBatch = 20

// BenchmarkPodStart measures pod start latency with both runtimes: from
// the create call's return to the pod's status saying Running as the API
// server's watch delivers it, for podStartBatch pods started one after
// the other. Each iteration reports the batch's median (ms-median/pod)
// and p90. After the runs, the agent's resident memory is reported, and
// with the CRI runtime containerd's too (MiB).
//
//	go test ./test/e2e -run '^$' -bench BenchmarkPodStart -benchtime 1x -count 5
func BenchmarkPodStart(b *testing.B) {
	b.Run("process", func(b *testing.B) {
		c := newResourcesCluster(b)
		ip := testBridge(b)
		agent := startAgent(b, c.s, "bench-proc", b.TempDir(), "--node-ip", ip, "--address", ip)
		c.waitReady(agent, "bench-proc")
		benchPodStarts(b, c.client, func(name string) *corev1.Pod {
			// The process runtime runs the command on the host.
			return benchPod(name, "busybox", c.tag, []string{"sleep", "3600"})
		})
		b.ReportMetric(rssMiB(b, agent.cmd.Process.Pid), "MiB-agent-rss")
	})
	b.Run("cri", func(b *testing.B) {
		c := newCRICluster(b, "bench-cri")
		benchPodStarts(b, c.client, func(name string) *corev1.Pod {
			return benchPod(name, c.image, "", []string{"sleep", "3600"})
		})
		b.ReportMetric(rssMiB(b, c.agent.cmd.Process.Pid), "MiB-agent-rss")
		b.ReportMetric(rssMiB(b, containerdPid(b)), "MiB-containerd-rss")
	})
}

// benchPodStarts runs b.N batches and reports their latencies.
func benchPodStarts(b *testing.B, client kubernetes.Interface, pod func(string) *corev1.Pod) {
	var all []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := 0; j < podStartBatch; j++ {
			all = append(all, startOnePod(b, client, pod(fmt.Sprintf("start-%d-%d", i, j))))
		}
	}
	b.StopTimer()
	slices.Sort(all)
	b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "ms-median/pod")
	b.ReportMetric(float64(all[len(all)*9/10].Microseconds())/1000, "ms-p90/pod")
}

// startOnePod creates pod and waits, on a watch begun before the create,
// until its status says Running.
func startOnePod(b *testing.B, client kubernetes.Interface, pod *corev1.Pod) time.Duration {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w, err := client.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + pod.Name})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	if _, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	created := time.Now()
	for ev := range w.ResultChan() {
		if ev.Type == watch.Error {
			b.Fatalf("watching %s: %v", pod.Name, ev.Object)
		}
		if p, ok := ev.Object.(*corev1.Pod); ok && p.Status.Phase == corev1.PodRunning {
			return time.Since(created)
		}
	}
	b.Fatalf("%s did not run within a minute", pod.Name)
	return 0
}

func benchPod(name, image, marker string, command []string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: new(int64),
			Containers:                    []corev1.Container{{Name: "main", Image: image, Command: command}},
		},
	}
	if marker != "" {
		// The marker lets the cleanup find the processes.
		p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: markerEnv, Value: marker}}
	}
	return p
}

// rssMiB is pid's resident memory (VmRSS) in MiB.
func rssMiB(b *testing.B, pid int) float64 {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb / 1024
		}
	}
	b.Fatalf("no VmRSS for pid %d", pid)
	return 0
}

// containerdPid is the pid of the containerd the test started (its
// socket is under a temporary directory named kncd*).
func containerdPid(b *testing.B) int {
	b.Helper()
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		cmdline, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if filepath.Base(args[0]) == "containerd" && strings.Contains(string(cmdline), os.TempDir()+"/kncd") {
			pid, _ := strconv.Atoi(filepath.Base(d))
			return pid
		}
	}
	b.Fatal("no containerd of the test's found")
	return 0
}
