package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"knode/internal/agent"
	"knode/internal/agent/host/linux"
	"knode/internal/agent/options"
	podruntime "knode/internal/agent/runtime"
	"knode/internal/agent/runtime/process"
	"knode/internal/server"
	"knode/internal/version"
)

// agentClientSettings are the agent's API client limits, as the kubelet's
// (kubeAPIQPS 50, burst 100), with upstream's 10 s heartbeat timeout.
func agentClientSettings(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 50, 100
	cfg.Timeout = 10 * time.Second
	cfg.UserAgent = "knode-agent/" + version.Knode
	return cfg
}

func newAgentCommand() *cobra.Command {
	var o options.Options
	var verbose bool
	var runtimeName string
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the node agent for this machine: register the Node, report its status, renew its Lease",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			settings, err := o.Complete(cmd.Flags())
			if err != nil {
				return err
			}
			if o.Kubeconfig == "" {
				return fmt.Errorf("--kubeconfig is required")
			}
			restCfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
			if err != nil {
				return fmt.Errorf("--kubeconfig: %w", err)
			}
			return runAgent(cmd.Context(), agentClientSettings(restCfg), settings, runtimeName, logger(verbose), nil)
		},
	}
	o.AddFlags(cmd.Flags())
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "log debug messages")
	cmd.Flags().StringVar(&runtimeName, "runtime", runtimeProcess, `how pods run: "process" (each container a process on this machine) or "none" (register and report only)`)
	return cmd
}

// Pod runtimes `knode agent --runtime` offers.
const (
	runtimeProcess = "process"
	runtimeNone    = "none"
)

// runAgent runs an agent with settings until ctx ends.
func runAgent(ctx context.Context, restCfg *rest.Config, s options.Settings, runtimeName string, log *slog.Logger, onReady func(*corev1.Node)) error {
	h := linux.New(linux.Config{})
	name, err := agent.NodeName(s.HostnameOverride, h)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(s.RootDir, 0o700); err != nil {
		return fmt.Errorf("--root-dir: %w", err)
	}
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	var rt podruntime.Runtime
	switch runtimeName {
	case runtimeProcess:
		p, err := process.New(process.Config{RootDir: s.RootDir, Logger: log})
		if err != nil {
			return err
		}
		defer p.KillAll()
		rt = p
	case runtimeNone:
	default:
		return fmt.Errorf("--runtime %q: supported values: %q, %q", runtimeName, runtimeProcess, runtimeNone)
	}
	a, err := agent.New(agent.Config{
		Client:                    client,
		NodeName:                  name,
		RegisterNode:              s.RegisterNode,
		RegisterWithTaints:        s.RegisterWithTaints,
		NodeLabels:                s.NodeLabels,
		ProviderID:                s.ProviderID,
		Status:                    s.StatusConfig(name, name, version.GitVersion()),
		NodeStatusUpdateFrequency: s.NodeStatusUpdateFrequency,
		NodeStatusReportFrequency: s.NodeStatusReportFrequency,
		NodeLeaseDurationSeconds:  s.NodeLeaseDurationSeconds,
		Host:                      h,
		RootDir:                   s.RootDir,
		Runtime:                   rt,
		OnReady:                   onReady,
		Logger:                    log,
	})
	if err != nil {
		return err
	}
	log.Info("knode agent starting", "node", name)
	return a.Run(ctx)
}

// localAgentConfig is the client of the agent `knode up` runs beside its
// server: a node identity for this machine, issued by the cluster CA.
func localAgentConfig(s *server.Server, nodeName string) (*rest.Config, error) {
	certPEM, keyPEM, err := s.PKI().IssueClientCert("system:node:"+nodeName, []string{"system:nodes"}, 365*24*time.Hour)
	if err != nil {
		return nil, err
	}
	return agentClientSettings(&rest.Config{
		Host:            s.URL,
		TLSClientConfig: rest.TLSClientConfig{CAData: s.PKI().CAPEM(), CertData: certPEM, KeyData: keyPEM},
	}), nil
}
