package hostpath

import (
	"context"
	"os"

	csi "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"knode/internal/version"
)

// identity is the Identity service of one socket; what it reports depends
// on the services that socket serves.
type identity struct {
	csi.UnimplementedIdentityServer
	d        *Driver
	services Services
}

func (i *identity) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: i.d.cfg.DriverName, VendorVersion: version.Knode}, nil
}

func (i *identity) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	var caps []*csi.PluginCapability
	service := func(t csi.PluginCapability_Service_Type) {
		caps = append(caps, &csi.PluginCapability{Type: &csi.PluginCapability_Service_{
			Service: &csi.PluginCapability_Service{Type: t},
		}})
	}
	if i.services&Controller != 0 {
		service(csi.PluginCapability_Service_CONTROLLER_SERVICE)
	}
	if len(i.d.cfg.Topology) > 0 {
		service(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS)
	}
	return &csi.GetPluginCapabilitiesResponse{Capabilities: caps}, nil
}

// Probe reports ready while the data dir can be read.
func (i *identity) Probe(context.Context, *csi.ProbeRequest) (_ *csi.ProbeResponse, err error) {
	defer func() { err = toStatus(err) }()
	if _, err := os.Stat(i.d.cfg.DataDir); err != nil {
		return nil, fail(ErrPrecondition, "data dir is not usable: %v", err)
	}
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil
}
