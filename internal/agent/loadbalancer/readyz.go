package loadbalancer

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"k8s.io/client-go/rest"
)

// ReadyzCheck is a Config.Check that asks a server's GET /readyz over
// HTTPS, trusting the certificate authority of cfg (a client config of
// the cluster) and presenting no credentials: the health paths need
// none. 200 passes; any other status, or no answer, fails. Connections
// are kept between checks.
func ReadyzCheck(cfg *rest.Config) (func(ctx context.Context, address string) error, error) {
	tlsCfg, err := rest.TLSConfigFor(&rest.Config{TLSClientConfig: rest.TLSClientConfig{
		CAFile: cfg.CAFile, CAData: cfg.CAData, ServerName: cfg.ServerName,
	}})
	if err != nil {
		return nil, fmt.Errorf("loadbalancer: health check: %w", err)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg, MaxIdleConnsPerHost: 1}}
	return func(ctx context.Context, address string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+address+"/readyz", nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /readyz: %s: %s", resp.Status, body)
		}
		return nil
	}, nil
}
