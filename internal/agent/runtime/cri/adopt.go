package cri

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"knode/internal/agent/runtime"
)

// adopt holds again the pods a previous Runtime left in the CRI runtime
// (see the package doc), and removes what of its sandboxes and containers
// cannot be adopted. It fails only when the runtime cannot be listed or a
// container's status cannot be read: then nothing is removed.
func (r *Runtime) adopt(ctx context.Context) error {
	cctx := r.callCtx(ctx)
	managed := map[string]string{LabelManaged: "true"}
	sandboxes, err := r.rt.ListPodSandbox(cctx, &runtimeapi.PodSandboxFilter{LabelSelector: managed})
	if err != nil {
		return fmt.Errorf("listing sandboxes: %w", err)
	}
	containers, err := r.rt.ListContainers(cctx, &runtimeapi.ContainerFilter{LabelSelector: managed})
	if err != nil {
		return fmt.Errorf("listing containers: %w", err)
	}
	byUID := map[string][]*runtimeapi.PodSandbox{}
	for _, sb := range sandboxes {
		uid := sb.GetMetadata().GetUid()
		byUID[uid] = append(byUID[uid], sb)
	}
	bySandbox := map[string][]*runtimeapi.Container{}
	for _, c := range containers {
		bySandbox[c.PodSandboxId] = append(bySandbox[c.PodSandboxId], c)
	}

	type adoption struct {
		pod     *pod
		discard []*runtimeapi.PodSandbox
		// drop are container instances to remove: older runs, runs never
		// started, containers the pod does not have.
		drop []*runtimeapi.Container
	}
	var adoptions []adoption
	var orphans []*runtimeapi.PodSandbox
	for uid, sbs := range byUID {
		// The newest sandbox is the pod's; older ones are leftovers.
		slices.SortFunc(sbs, func(a, b *runtimeapi.PodSandbox) int { return cmp.Compare(b.CreatedAt, a.CreatedAt) })
		p, drop, err := r.adoptPod(ctx, sbs[0], bySandbox[sbs[0].Id])
		if errors.Is(err, errStatus) {
			return err
		}
		if err != nil {
			r.log.Warn("not adopting a previous agent's pod: removing its sandbox", "uid", uid, "reason", err)
			orphans = append(orphans, sbs...)
			continue
		}
		adoptions = append(adoptions, adoption{pod: p, discard: sbs[1:], drop: drop})
	}
	known := map[string]bool{}
	for _, sb := range sandboxes {
		known[sb.Id] = true
	}

	for _, sb := range orphans {
		r.removeSandbox(cctx, sb)
		if pod, err := sandboxPod(sb); err == nil {
			_ = os.RemoveAll(podLogDir(r.cfg.PodLogsDir, pod))
		}
	}
	for _, c := range containers {
		if !known[c.PodSandboxId] {
			r.log.Info("removing a container whose sandbox is gone", "container", c.Id, "name", c.GetMetadata().GetName())
			if err := r.rt.RemoveContainer(cctx, c.Id); err != nil && !isNotFound(err) {
				r.log.Warn("removing a leftover container failed", "container", c.Id, "err", err)
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, pl := range adoptions {
		p := pl.pod
		for _, sb := range pl.discard {
			r.removeSandbox(cctx, sb)
		}
		for _, c := range pl.drop {
			if err := r.rt.RemoveContainer(cctx, c.Id); err != nil && !isNotFound(err) {
				r.log.Warn("removing an old run of a container failed", "pod", p.uid, "container", c.Id, "err", err)
				continue
			}
			if n, ok := restartCountOf(c); ok {
				_ = os.Remove(filepath.Join(p.logDir, logPath(c.GetMetadata().GetName(), n)))
			}
		}
		r.pods[p.uid] = p
		r.log.Info("adopted a previous agent's pod", "pod", p.spec.Namespace+"/"+p.spec.Name, "uid", p.uid,
			"running", len(p.plan.Running()), "stopping", p.plan.Stopping())
	}
	return nil
}

// errStatus marks a failure to read a container's status during adoption,
// which fails New rather than discard running containers.
var errStatus = errors.New("reading a container's status")

// removeSandbox stops and removes a sandbox (and its containers).
func (r *Runtime) removeSandbox(ctx context.Context, sb *runtimeapi.PodSandbox) {
	if err := r.rt.StopPodSandbox(ctx, sb.Id); err != nil && !isNotFound(err) {
		r.log.Warn("stopping a leftover sandbox failed", "sandbox", sb.Id, "err", err)
		return
	}
	if err := r.rt.RemovePodSandbox(ctx, sb.Id); err != nil && !isNotFound(err) {
		r.log.Warn("removing a leftover sandbox failed", "sandbox", sb.Id, "err", err)
	}
}

// sandboxPod is the pod kept on a sandbox (AnnotationPod).
func sandboxPod(sb *runtimeapi.PodSandbox) (*corev1.Pod, error) {
	data, ok := sb.Annotations[AnnotationPod]
	if !ok {
		return nil, fmt.Errorf("sandbox %s has no %s annotation", sb.Id, AnnotationPod)
	}
	pod := &corev1.Pod{}
	if err := json.Unmarshal([]byte(data), pod); err != nil {
		return nil, fmt.Errorf("sandbox %s: %s: %w", sb.Id, AnnotationPod, err)
	}
	if string(pod.UID) != sb.GetMetadata().GetUid() {
		return nil, fmt.Errorf("sandbox %s: %s names uid %q, the sandbox %q", sb.Id, AnnotationPod, pod.UID, sb.GetMetadata().GetUid())
	}
	if pod.Name == "" || pod.Namespace == "" {
		return nil, fmt.Errorf("sandbox %s: %s has no name or namespace", sb.Id, AnnotationPod)
	}
	return pod, nil
}

// adoptPod rebuilds the pod of sandbox sb from its annotation and its
// containers' instances, and lists the instances to remove.
func (r *Runtime) adoptPod(ctx context.Context, sb *runtimeapi.PodSandbox, instances []*runtimeapi.Container) (*pod, []*runtimeapi.Container, error) {
	spec, err := sandboxPod(sb)
	if err != nil {
		return nil, nil, err
	}
	cctx := r.callCtx(ctx)
	stopping := sb.State != runtimeapi.PodSandboxState_SANDBOX_READY
	specs := allContainers(spec)
	byName := map[string][]*runtimeapi.Container{}
	var drop []*runtimeapi.Container
	for _, c := range instances {
		name := c.GetMetadata().GetName()
		_, hasCount := restartCountOf(c)
		switch {
		case !slices.ContainsFunc(specs, func(s corev1.Container) bool { return s.Name == name }) || !hasCount:
			drop = append(drop, c)
		case c.State == runtimeapi.ContainerState_CONTAINER_CREATED:
			// A start the previous agent did not finish.
			drop = append(drop, c)
		default:
			byName[name] = append(byName[name], c)
		}
	}

	p := newPod(spec, podLogDir(r.cfg.PodLogsDir, spec), nil)
	records := make([]runtime.ContainerRecord, len(specs))
	for i, cs := range specs {
		runs := byName[cs.Name]
		if len(runs) == 0 {
			continue
		}
		slices.SortFunc(runs, func(a, b *runtimeapi.Container) int {
			na, _ := restartCountOf(a)
			nb, _ := restartCountOf(b)
			return cmp.Or(cmp.Compare(na, nb), cmp.Compare(a.CreatedAt, b.CreatedAt))
		})
		last := runs[len(runs)-1]
		var prev *runtimeapi.Container
		if len(runs) >= 2 {
			prev = runs[len(runs)-2]
			drop = append(drop, runs[:len(runs)-2]...)
		}
		rec, err := r.record(cctx, last)
		if err != nil {
			return nil, nil, err
		}
		if prev != nil {
			prevRec, err := r.record(cctx, prev)
			if err != nil {
				return nil, nil, err
			}
			rec.LastTermination = prevRec.Exit
		}
		records[i] = rec
		ct := p.ctrs[i]
		ct.started = true
		ct.id = last.Id
		ct.restartCount, _ = restartCountOf(last)
		if prev != nil {
			ct.prevID = prev.Id
			ct.prevRestartCount, _ = restartCountOf(prev)
		}
	}
	plan, err := runtime.RestorePlan(spec, records, stopping, r.cfg.Clock.Now(), r.cfg.Backoff)
	if err != nil {
		return nil, nil, err
	}
	p.plan = plan
	p.sandboxID = sb.Id
	p.attempt = sb.GetMetadata().GetAttempt()
	p.sandboxStopped = stopping
	p.sandbox, err = sandboxConfig(spec, sandboxInput{
		attempt:      p.attempt,
		logDir:       p.logDir,
		cgroupParent: r.podCgroup(spec),
	})
	if err != nil {
		return nil, nil, err
	}
	if !stopping {
		if p.ips, err = r.sandboxIPs(ctx, sb.Id); err != nil {
			r.log.Warn("reading an adopted sandbox's addresses failed", "pod", p.uid, "err", err)
		}
	}
	return p, drop, nil
}

// record is the Plan's view of one container instance: its run's start
// (as annotated), its end (as the runtime reports it) and its back-off.
func (r *Runtime) record(ctx context.Context, c *runtimeapi.Container) (runtime.ContainerRecord, error) {
	resp, err := r.rt.ContainerStatus(ctx, c.Id, false)
	var st *runtimeapi.ContainerStatus
	switch {
	case err == nil:
		st = resp.GetStatus()
	case isNotFound(err):
	default:
		return runtime.ContainerRecord{}, fmt.Errorf("%w %s: %w", errStatus, c.Id, err)
	}
	n, _ := restartCountOf(c)
	rec := runtime.ContainerRecord{
		Started:      true,
		ID:           r.runtimeName + "://" + c.Id,
		RestartCount: n,
		StartedAt:    annotatedTime(c.Annotations[AnnotationStartedAt]),
		LastRestart:  annotatedTime(c.Annotations[AnnotationLastRestart]),
	}
	rec.BackoffDelay, _ = time.ParseDuration(c.Annotations[AnnotationBackoffDelay])
	rec.BackoffDelay = max(rec.BackoffDelay, 0)
	if rec.StartedAt.IsZero() {
		switch {
		case st != nil && st.StartedAt > 0:
			rec.StartedAt = time.Unix(0, st.StartedAt)
		default:
			rec.StartedAt = time.Unix(0, c.CreatedAt)
		}
	}
	if st != nil && st.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
		return rec, nil
	}
	code, reason, message := exitOf(st)
	finished := r.cfg.Clock.Now()
	if st != nil && st.FinishedAt > 0 {
		finished = time.Unix(0, st.FinishedAt)
	}
	rec.Exit = &corev1.ContainerStateTerminated{
		ExitCode:    code,
		Reason:      reason,
		Message:     message,
		StartedAt:   metav1.NewTime(rec.StartedAt),
		FinishedAt:  metav1.NewTime(finished),
		ContainerID: rec.ID,
	}
	return rec, nil
}

// restartCountOf is a container instance's restart count: upstream's
// annotation, else its metadata's attempt.
func restartCountOf(c *runtimeapi.Container) (int32, bool) {
	if v, ok := c.Annotations[AnnotationRestartCount]; ok {
		n, err := strconv.ParseInt(v, 10, 32)
		return int32(n), err == nil && n >= 0
	}
	if c.Metadata == nil {
		return 0, false
	}
	return int32(c.Metadata.Attempt), true
}

// annotatedTime parses an RFC 3339 annotation; zero when absent or bad.
func annotatedTime(v string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}
	}
	return t
}
