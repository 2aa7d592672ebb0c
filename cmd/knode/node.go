package main

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"knode/internal/fence"
	"knode/internal/volume"
)

func newNodeCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Act on a node of the cluster",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newNodeFenceCommand())
	return cmd
}

func newNodeFenceCommand() *cobra.Command {
	var kubeconfig, cloudName, cloudConfig string
	var force bool
	cmd := &cobra.Command{
		Use:   "fence NODE",
		Short: "Mark a node whose machine is off as out of service, so its pods and volumes move elsewhere",
		Long: `Fence adds the taint ` + volume.TaintOutOfService + `=` + fence.TaintValue + `:` + string(fence.TaintEffect) + ` to NODE
(non-graceful node shutdown): its terminating pods are force-deleted and its
volumes force-detached at once, so they can start on other nodes.

That is only safe when the machine is really off. Unless --force is given,
the cloud provider (--cloud-provider, --cloud-config, as knode server takes
them) is asked first, and the node is fenced only if it reports the
instance shut down or gone.

Remove the taint once the node is back and has no pods:
  kubectl taint nodes NODE ` + volume.TaintOutOfService + `-`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			name := args[0]
			cloud, err := newCloudProvider(cloudName, cloudConfig)
			if err != nil {
				return err
			}
			restCfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return fmt.Errorf("reading --kubeconfig %s: %w", kubeconfig, err)
			}
			client, err := kubernetes.NewForConfig(restCfg)
			if err != nil {
				return err
			}
			nodes := client.CoreV1().Nodes()
			out := cmd.OutOrStdout()
			node, err := nodes.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if volume.OutOfService(node) {
				fmt.Fprintf(out, "node/%s already fenced: it has the %s taint\n", name, volume.TaintOutOfService)
				return nil
			}
			reason, err := fence.Check(ctx, cloud, node, force)
			if err != nil {
				return err
			}
			_, already, err := fence.Apply(ctx, nodes, name, time.Now())
			if err != nil {
				return err
			}
			if already {
				fmt.Fprintf(out, "node/%s already fenced: it has the %s taint\n", name, volume.TaintOutOfService)
				return nil
			}
			fmt.Fprintf(out, "node/%s fenced: %s\n", name, reason)
			fmt.Fprintf(out, "once the node is back, remove the taint: kubectl taint nodes %s %s-\n", name, volume.TaintOutOfService)
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&kubeconfig, "kubeconfig", filepath.Join(defaultDataDir(), "admin.kubeconfig"), "kubeconfig of a user that may get and patch nodes; the default is the admin kubeconfig that knode up (or knode server --data-dir ~/.knode) writes")
	fs.StringVar(&cloudName, "cloud-provider", "", `cloud provider asked whether the node's machine is off: "" for none, or "exec" with --cloud-config`)
	fs.StringVar(&cloudConfig, "cloud-config", "", "configuration file of the cloud provider (for exec: see README)")
	fs.BoolVar(&force, "force", false, "fence without asking a cloud provider; only when you have confirmed the machine is off")
	return cmd
}
