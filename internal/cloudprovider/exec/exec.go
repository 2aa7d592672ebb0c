package exec

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	osexec "os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/clock"
	"sigs.k8s.io/yaml"

	"knode/internal/cloudprovider"
)

// ProviderName is the --cloud-provider value that selects this provider.
const ProviderName = "exec"

// DefaultTimeout bounds one call when the cloud-config names no timeout.
const DefaultTimeout = 10 * time.Second

// ExitNotImplemented is the exit status by which a command says it cannot
// answer a question.
const ExitNotImplemented = 3

// The questions, as passed to the command.
const (
	QuestionExists   = "instance-exists"
	QuestionShutdown = "instance-shutdown"
	QuestionMetadata = "instance-metadata"
)

const (
	maxStdout = 1 << 20
	maxStderr = 4 << 10
	// waitDelay bounds how long a finished or killed command's stray
	// children may hold its output open (os/exec's WaitDelay).
	waitDelay = 2 * time.Second
)

// ErrCommand is matched (errors.Is) by every error a call returns except
// cloudprovider.ErrNotImplemented: the command failed, timed out or gave
// an answer that does not follow the protocol.
var ErrCommand = errors.New("cloud provider command failed")

// Config builds a Provider.
type Config struct {
	// Command is the executable: an absolute path, a path relative to the
	// current directory, or a name looked up in PATH. Required.
	Command string
	// Args go before the question and node name.
	Args []string
	// Env is added to knode's environment for every call.
	Env map[string]string
	// Timeout bounds each call; 0 means DefaultTimeout.
	Timeout time.Duration
	// Clock counts the timeout; zero value means the real clock.
	Clock clock.WithDelayedExecution
}

// fileConfig is the cloud-config file.
type fileConfig struct {
	Command string            `json:"command"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Timeout string            `json:"timeout,omitempty"`
}

// LoadConfig reads a cloud-config file (see the package documentation).
// A relative command path with a slash is resolved against the file's
// directory. Errors name the file and the field.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("cloud-config: %w", err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return Config{}, fmt.Errorf("cloud-config %s: %w", path, err)
	}
	if strings.Contains(cfg.Command, "/") && !filepath.IsAbs(cfg.Command) {
		cfg.Command = filepath.Join(filepath.Dir(path), cfg.Command)
	}
	return cfg, nil
}

// ParseConfig parses the text of a cloud-config file; unknown keys and
// bad values are errors naming the field.
func ParseConfig(data []byte) (Config, error) {
	var fc fileConfig
	if err := yaml.UnmarshalStrict(data, &fc); err != nil {
		return Config{}, err
	}
	var errs field.ErrorList
	if strings.TrimSpace(fc.Command) == "" {
		errs = append(errs, field.Required(field.NewPath("command"), ""))
	}
	cfg := Config{Command: fc.Command, Args: fc.Args, Env: fc.Env}
	if fc.Timeout != "" {
		d, err := time.ParseDuration(fc.Timeout)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(field.NewPath("timeout"), fc.Timeout, "must be a duration such as 10s"))
		case d <= 0:
			errs = append(errs, field.Invalid(field.NewPath("timeout"), fc.Timeout, "must be greater than zero"))
		default:
			cfg.Timeout = d
		}
	}
	for k := range fc.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			errs = append(errs, field.Invalid(field.NewPath("env").Key(k), k, "must be a non-empty name without '=' or NUL"))
		}
	}
	return cfg, errs.ToAggregate()
}

// Provider runs the configured command per question. It is safe for
// concurrent use; each call runs its own process.
type Provider struct {
	cfg     Config
	command string // resolved path
	env     []string
}

var _ cloudprovider.Interface = (*Provider)(nil)

// New checks cfg and builds a Provider. The command must exist and be
// executable.
func New(cfg Config) (*Provider, error) {
	if cfg.Command == "" {
		return nil, errors.New("exec cloud provider: command is required")
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("exec cloud provider: timeout %v must not be negative", cfg.Timeout)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	path, err := osexec.LookPath(cfg.Command)
	if err != nil {
		return nil, fmt.Errorf("exec cloud provider: command %q: %w", cfg.Command, err)
	}
	keys := make([]string, 0, len(cfg.Env))
	for k := range cfg.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	env := os.Environ()
	for _, k := range keys {
		env = append(env, k+"="+cfg.Env[k])
	}
	return &Provider{cfg: cfg, command: path, env: env}, nil
}

// InstanceExists asks instance-exists.
func (p *Provider) InstanceExists(ctx context.Context, node *corev1.Node) (bool, error) {
	var answer struct {
		Exists *bool `json:"exists"`
	}
	if err := p.ask(ctx, QuestionExists, node, &answer); err != nil {
		return false, err
	}
	if answer.Exists == nil {
		return false, p.errorf(QuestionExists, node, "answer: %v", field.Required(field.NewPath("exists"), ""))
	}
	return *answer.Exists, nil
}

// InstanceShutdown asks instance-shutdown.
func (p *Provider) InstanceShutdown(ctx context.Context, node *corev1.Node) (bool, error) {
	var answer struct {
		Shutdown *bool `json:"shutdown"`
	}
	if err := p.ask(ctx, QuestionShutdown, node, &answer); err != nil {
		return false, err
	}
	if answer.Shutdown == nil {
		return false, p.errorf(QuestionShutdown, node, "answer: %v", field.Required(field.NewPath("shutdown"), ""))
	}
	return *answer.Shutdown, nil
}

// metadataAnswer is the instance-metadata answer.
type metadataAnswer struct {
	ProviderID       string               `json:"providerID"`
	InstanceType     string               `json:"instanceType"`
	Zone             string               `json:"zone"`
	Region           string               `json:"region"`
	Addresses        []corev1.NodeAddress `json:"addresses"`
	AdditionalLabels map[string]string    `json:"additionalLabels"`
}

var addressTypes = []corev1.NodeAddressType{
	corev1.NodeHostName, corev1.NodeInternalIP, corev1.NodeExternalIP, corev1.NodeInternalDNS, corev1.NodeExternalDNS,
}

// InstanceMetadata asks instance-metadata.
func (p *Provider) InstanceMetadata(ctx context.Context, node *corev1.Node) (*cloudprovider.InstanceMetadata, error) {
	var answer metadataAnswer
	if err := p.ask(ctx, QuestionMetadata, node, &answer); err != nil {
		return nil, err
	}
	var errs field.ErrorList
	for i, a := range answer.Addresses {
		path := field.NewPath("addresses").Index(i)
		known := false
		for _, t := range addressTypes {
			known = known || a.Type == t
		}
		if !known {
			errs = append(errs, field.NotSupported(path.Child("type"), a.Type, addressTypes))
		}
		if a.Address == "" {
			errs = append(errs, field.Required(path.Child("address"), ""))
		}
	}
	if len(errs) > 0 {
		return nil, p.errorf(QuestionMetadata, node, "answer: %v", errs.ToAggregate())
	}
	return &cloudprovider.InstanceMetadata{
		ProviderID:       answer.ProviderID,
		InstanceType:     answer.InstanceType,
		NodeAddresses:    answer.Addresses,
		Zone:             answer.Zone,
		Region:           answer.Region,
		AdditionalLabels: answer.AdditionalLabels,
	}, nil
}

// ask runs the command for one question and decodes its answer into out.
func (p *Provider) ask(ctx context.Context, question string, node *corev1.Node, out any) error {
	if node == nil {
		return fmt.Errorf("%w: %s: node is nil", ErrCommand, question)
	}
	stdin, err := nodeJSON(node)
	if err != nil {
		return p.errorf(question, node, "encoding the node: %v", err)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	timedOut := make(chan struct{})
	timer := p.cfg.Clock.AfterFunc(p.cfg.Timeout, func() {
		close(timedOut)
		cancel()
	})
	defer timer.Stop()

	args := append(append([]string{}, p.cfg.Args...), question, node.Name)
	cmd := osexec.CommandContext(ctx, p.command, args...)
	cmd.Env = append(append([]string{}, p.env...),
		"KNODE_QUESTION="+question,
		"KNODE_NODE_NAME="+node.Name,
		"KNODE_PROVIDER_ID="+node.Spec.ProviderID,
	)
	cmd.Stdin = bytes.NewReader(stdin)
	stdout := &capped{max: maxStdout}
	stderr := &capped{max: maxStderr, keepTail: true}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = waitDelay
	ownProcessGroup(cmd)

	runErr := cmd.Run()
	if runErr != nil {
		select {
		case <-timedOut:
			return p.errorf(question, node, "timed out after %v%s", p.cfg.Timeout, stderr.suffix())
		default:
		}
		if ctx.Err() != nil {
			return p.errorf(question, node, "%v%s", ctx.Err(), stderr.suffix())
		}
	}
	var exit *osexec.ExitError
	switch {
	case errors.As(runErr, &exit) && exit.ExitCode() == ExitNotImplemented:
		return fmt.Errorf("exec cloud provider: %s: %w", p.describe(question, node), cloudprovider.ErrNotImplemented)
	case runErr != nil:
		return p.errorf(question, node, "%v%s", runErr, stderr.suffix())
	case stdout.truncated:
		return p.errorf(question, node, "answer is longer than %d bytes", maxStdout)
	}
	dec := json.NewDecoder(bytes.NewReader(stdout.buf.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		return p.errorf(question, node, "answer %q: %v", abbreviate(stdout.buf.String()), err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return p.errorf(question, node, "answer %q: more than one JSON value", abbreviate(stdout.buf.String()))
	}
	return nil
}

// describe names a call: the command line as run.
func (p *Provider) describe(question string, node *corev1.Node) string {
	parts := append(append([]string{p.command}, p.cfg.Args...), question, node.Name)
	return fmt.Sprintf("%q", strings.Join(parts, " "))
}

func (p *Provider) errorf(question string, node *corev1.Node, format string, args ...any) error {
	return fmt.Errorf("exec cloud provider: %s: %w: %s", p.describe(question, node), ErrCommand, fmt.Sprintf(format, args...))
}

// nodeJSON is the node with its type meta filled in, as a client would
// read it.
func nodeJSON(node *corev1.Node) ([]byte, error) {
	n := node.DeepCopy()
	n.APIVersion, n.Kind = "v1", "Node"
	return json.Marshal(n)
}

func abbreviate(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// capped keeps at most max bytes of what is written: the head, or with
// keepTail the tail. It never fails a write, so the command is not killed
// by a broken pipe for being chatty.
type capped struct {
	buf       bytes.Buffer
	max       int
	keepTail  bool
	truncated bool
}

func (c *capped) Write(p []byte) (int, error) {
	n := len(p)
	if c.keepTail {
		c.buf.Write(p)
		if over := c.buf.Len() - c.max; over > 0 {
			tail := append([]byte{}, c.buf.Bytes()[over:]...)
			c.buf.Reset()
			c.buf.Write(tail)
			c.truncated = true
		}
		return n, nil
	}
	if room := c.max - c.buf.Len(); room < len(p) {
		p = p[:max(room, 0)]
		c.truncated = true
	}
	c.buf.Write(p)
	return n, nil
}

// suffix is ": stderr: <text>" if the command wrote to stderr.
func (c *capped) suffix() string {
	s := strings.TrimSpace(c.buf.String())
	if s == "" {
		return ""
	}
	if c.truncated {
		s = "..." + s
	}
	return ": stderr: " + s
}
