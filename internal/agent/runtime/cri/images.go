package cri

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Waiting reasons of image pulls and container creation; the strings are
// upstream's.
const (
	ReasonErrImagePull         = "ErrImagePull"
	ReasonImagePullBackOff     = "ImagePullBackOff"
	ReasonErrImageNeverPull    = "ErrImageNeverPull"
	ReasonInvalidImageName     = "InvalidImageName"
	ReasonImageInspectError    = "ImageInspectError"
	ReasonCreateContainerError = "CreateContainerError"
)

// Event reasons; the strings are upstream's (pkg/kubelet/events).
const (
	EventPulling                = "Pulling"
	EventPulled                 = "Pulled"
	EventFailed                 = "Failed"
	EventInspectFailed          = "InspectFailed"
	EventErrImageNeverPull      = "ErrImageNeverPull"
	EventBackOff                = "BackOff"
	EventCreated                = "Created"
	EventStarted                = "Started"
	EventKilling                = "Killing"
	EventFailedCreatePodSandBox = "FailedCreatePodSandBox"
)

// MaxImages is how many images Images reports at most, as upstream's
// nodeStatusMaxImages; MaxNamesPerImage how many names per image.
const (
	MaxImages        = 50
	MaxNamesPerImage = 5
)

// backoffs is upstream's image back-off (client-go's flowcontrol.Backoff
// without jitter), per key: a key is in back-off for its delay after its
// last failure; a failure more than twice the maximum after the last one
// starts over at the initial delay, any other doubles the delay up to the
// maximum. Not safe for concurrent use.
type backoffs struct {
	initial, max time.Duration
	entries      map[string]*backoffEntry
}

type backoffEntry struct {
	delay time.Duration
	last  time.Time
}

func newBackoffs(initial, max time.Duration) *backoffs {
	return &backoffs{initial: initial, max: max, entries: map[string]*backoffEntry{}}
}

// inBackoff reports whether key's last failure is less than its delay
// before now.
func (b *backoffs) inBackoff(key string, now time.Time) bool {
	e := b.entries[key]
	return e != nil && now.Sub(e.last) < e.delay
}

// last is when key last failed; zero when it never did.
func (b *backoffs) last(key string) time.Time {
	if e := b.entries[key]; e != nil {
		return e.last
	}
	return time.Time{}
}

// failed records a failure of key at now.
func (b *backoffs) failed(key string, now time.Time) {
	e := b.entries[key]
	if e == nil || now.Sub(e.last) > 2*b.max {
		e = &backoffEntry{delay: b.initial}
		b.entries[key] = e
	} else {
		e.delay = min(2*e.delay, b.max)
	}
	e.last = now
}

// reset drops key: its next failure starts over.
func (b *backoffs) reset(key string) { delete(b.entries, key) }

// forget drops every key that starts with prefix.
func (b *backoffs) forget(prefix string) {
	for k := range b.entries {
		if strings.HasPrefix(k, prefix) {
			delete(b.entries, k)
		}
	}
}

// imageResult is what ensuring a container's image came to.
type imageResult struct {
	// ref is the image's ID, when it is there.
	ref string
	// wait is why the container cannot start yet, when ref is "".
	wait *waiting
}

// ensureImage makes container c's image present as its pull policy says,
// recording upstream's events, and returns its ID or why the container
// waits. prev is why it waited so far (nil: it did not): a wait repeated
// (the same back-off, the same missing image) records no event again. A
// canceled ctx returns neither. Called without r.mu.
func (r *Runtime) ensureImage(ctx context.Context, p *pod, c *corev1.Container, sandbox *runtimeapi.PodSandboxConfig, prev *waiting) imageResult {
	image := c.Image
	repeated := func(reason string) bool { return prev != nil && prev.reason == reason }
	if strings.TrimSpace(image) == "" {
		msg := fmt.Sprintf("Failed to apply default image tag %q: couldn't parse image name %q: invalid reference format", image, image)
		if !repeated(ReasonInvalidImageName) {
			r.event(p, corev1.EventTypeWarning, EventInspectFailed, msg)
		}
		return imageResult{wait: &waiting{reason: ReasonInvalidImageName, message: msg}}
	}
	policy := pullPolicy(c)
	spec := &runtimeapi.ImageSpec{Image: image, UserSpecifiedImage: image}
	status, err := r.img.ImageStatus(r.callCtx(ctx), spec, false)
	if err != nil {
		if ctx.Err() != nil {
			return imageResult{}
		}
		msg := fmt.Sprintf("Failed to inspect image %q: %v", image, err)
		if !repeated(ReasonImageInspectError) {
			r.event(p, corev1.EventTypeWarning, EventInspectFailed, msg)
		}
		return imageResult{wait: &waiting{reason: ReasonImageInspectError, message: msg}}
	}
	if present := status.GetImage(); present != nil && policy != corev1.PullAlways {
		r.event(p, corev1.EventTypeNormal, EventPulled, fmt.Sprintf("Container image %q already present on machine", image))
		return imageResult{ref: present.Id}
	}
	if policy == corev1.PullNever {
		msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", image)
		if !repeated(ReasonErrImageNeverPull) {
			r.event(p, corev1.EventTypeWarning, EventErrImageNeverPull, msg)
		}
		return imageResult{wait: &waiting{reason: ReasonErrImageNeverPull, message: msg}}
	}
	key := string(p.uid) + "_" + image
	start := r.cfg.Clock.Now()
	r.mu.Lock()
	inBackoff := r.pulls.inBackoff(key, start)
	failedAt := r.pulls.last(key)
	r.mu.Unlock()
	if inBackoff && repeated(ReasonErrImagePull) && !start.After(failedAt) {
		// No time passed since the pull failed: it still shows.
		return imageResult{wait: prev}
	}
	if inBackoff {
		msg := fmt.Sprintf("Back-off pulling image %q", image)
		if !repeated(ReasonImagePullBackOff) {
			r.event(p, corev1.EventTypeNormal, EventBackOff, msg)
			r.event(p, corev1.EventTypeWarning, EventFailed, "Error: "+ReasonImagePullBackOff)
		}
		return imageResult{wait: &waiting{reason: ReasonImagePullBackOff, message: msg}}
	}
	r.event(p, corev1.EventTypeNormal, EventPulling, fmt.Sprintf("Pulling image %q", image))
	ref, err := r.pull(ctx, p, spec, sandbox)
	if err != nil {
		if ctx.Err() != nil {
			return imageResult{}
		}
		r.mu.Lock()
		r.pulls.failed(key, r.cfg.Clock.Now())
		r.mu.Unlock()
		r.event(p, corev1.EventTypeWarning, EventFailed, fmt.Sprintf("Failed to pull image %q: %v", image, err))
		r.event(p, corev1.EventTypeWarning, EventFailed, "Error: "+ReasonErrImagePull)
		return imageResult{wait: &waiting{reason: ReasonErrImagePull, message: err.Error()}}
	}
	took := r.cfg.Clock.Since(start).Truncate(time.Millisecond)
	var size uint64
	if st, err := r.img.ImageStatus(r.callCtx(ctx), &runtimeapi.ImageSpec{Image: ref}, false); err == nil && st.GetImage() != nil {
		size = st.GetImage().Size
	}
	r.event(p, corev1.EventTypeNormal, EventPulled,
		fmt.Sprintf("Successfully pulled image %q in %v (%v including waiting). Image size: %v bytes.", image, took, took, size))
	return imageResult{ref: ref}
}

// pull pulls an image with each of the pod's credentials in turn until one
// works, or anonymously when there are none.
func (r *Runtime) pull(ctx context.Context, p *pod, spec *runtimeapi.ImageSpec, sandbox *runtimeapi.PodSandboxConfig) (string, error) {
	var creds []*runtimeapi.AuthConfig
	if r.cfg.PullCredentials != nil {
		var err error
		creds, err = r.cfg.PullCredentials(ctx, p.spec, spec.Image)
		if err != nil {
			return "", fmt.Errorf("getting pull credentials: %w", err)
		}
	}
	if len(creds) == 0 {
		return r.img.PullImage(r.callCtx(ctx), spec, nil, sandbox)
	}
	var errs []error
	for _, auth := range creds {
		ref, err := r.img.PullImage(r.callCtx(ctx), spec, auth, sandbox)
		if err == nil {
			return ref, nil
		}
		errs = append(errs, err)
	}
	return "", errors.Join(errs...)
}

// Images lists the images in the runtime as node status reports them: the
// largest MaxImages, largest first, each with its repo digests, then its
// repo tags, at most MaxNamesPerImage names (images without a name are
// left out).
func (r *Runtime) Images(ctx context.Context) ([]corev1.ContainerImage, error) {
	list, err := r.img.ListImages(r.callCtx(ctx), &runtimeapi.ImageFilter{})
	if err != nil {
		return nil, fmt.Errorf("listing images: %w", err)
	}
	return nodeImages(list), nil
}

// nodeImages is the node status view of a CRI image list.
func nodeImages(list []*runtimeapi.Image) []corev1.ContainerImage {
	list = slices.Clone(list)
	slices.SortStableFunc(list, func(a, b *runtimeapi.Image) int {
		switch {
		case a.Size > b.Size:
			return -1
		case a.Size < b.Size:
			return 1
		}
		return 0
	})
	var out []corev1.ContainerImage
	for _, img := range list {
		if len(out) == MaxImages {
			break
		}
		names := append(slices.Clone(img.RepoDigests), img.RepoTags...)
		if len(names) == 0 {
			continue
		}
		if len(names) > MaxNamesPerImage {
			names = names[:MaxNamesPerImage]
		}
		out = append(out, corev1.ContainerImage{Names: names, SizeBytes: int64(img.Size)})
	}
	return out
}
