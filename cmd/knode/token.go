package main

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/spf13/cobra"

	"knode/internal/auth/bootstrap"
)

// newTokenCommand is `knode token`: it prints the cluster token a server
// keeps in its data directory, for starting the cluster's other servers
// with --token-file or --token.
func newTokenCommand() *cobra.Command {
	var dataDir string
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Print the cluster token other servers join this server's cluster with",
		Long: `Token prints the cluster token kept in DATA-DIR/` + bootstrap.TokenFileName + ` by the server that
runs with --data-dir DATA-DIR. Another server sharing the cluster's etcd
(--etcd-servers) joins with it: knode server --token-file FILE (or --token).

The token opens the cluster's CA key: keep it as secret as that key.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dataDir == "" {
				return fmt.Errorf("--data-dir is required")
			}
			t, err := bootstrap.LoadToken(dataDir)
			if errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("%s has no cluster token (has `knode server --data-dir %s` run with this release?): %w", dataDir, dataDir, err)
			}
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), t.String())
			return err
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", defaultDataDir(), "the server's data directory")
	return cmd
}
