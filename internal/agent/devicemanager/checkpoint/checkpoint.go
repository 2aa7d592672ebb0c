// Package checkpoint reads and writes the device manager's checkpoint,
// kubelet_internal_checkpoint, in the upstream kubelet's JSON format, so a
// file written by either is read by the other.
//
// The checksum is upstream's: FNV-32a over the go-spew dump
// (k8s.io/utils/dump.ForHash) of the Data field, widened to uint64. The dump
// names the Go types, so the types here keep upstream's package name
// (checkpoint) and type names (checkpointData, PodDevicesEntry,
// DevicesPerNUMA); renaming them would break the checksum.
//
// It does not keep the file or lock it; the caller writes the bytes (with
// knode/internal/atomicfile) and reads them back.
package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"

	"k8s.io/utils/dump"
)

// FileName is the checkpoint's name in the checkpoint directory.
const FileName = "kubelet_internal_checkpoint"

// ErrCorrupt is returned when the stored checksum does not match the data
// (upstream's errors.ErrCorruptCheckpoint).
var ErrCorrupt = errors.New("checkpoint is corrupted")

// DevicesPerNUMA maps a NUMA node ID to the device IDs on it; -1 holds the
// devices without topology.
type DevicesPerNUMA map[int64][]string

// PodDevicesEntry is the devices of one resource allocated to one container,
// and the plugin's marshalled ContainerAllocateResponse (protobuf bytes).
type PodDevicesEntry struct {
	PodUID        string
	ContainerName string
	ResourceName  string
	DeviceIDs     DevicesPerNUMA
	AllocResp     []byte
}

// checkpointData is what the checksum covers.
type checkpointData struct {
	PodDeviceEntries  []PodDevicesEntry
	RegisteredDevices map[string][]string
}

// data is the file's JSON: {"Data":{...},"Checksum":N[,"BootID":"..."]}.
type data struct {
	Data     checkpointData
	Checksum uint64
	// BootID sits outside Data so it does not change the checksum, as
	// upstream keeps it.
	BootID string `json:",omitempty"`
}

func checksum(d checkpointData) uint64 {
	h := fnv.New32a()
	_, _ = fmt.Fprintf(h, "%v", dump.ForHash(d))
	return uint64(h.Sum32())
}

// Encode returns the checkpoint JSON for entries and registered (resource
// name to healthy device IDs), checksum included.
func Encode(entries []PodDevicesEntry, registered map[string][]string) ([]byte, error) {
	d := data{Data: checkpointData{PodDeviceEntries: entries, RegisteredDevices: registered}}
	d.Checksum = checksum(d.Data)
	return json.Marshal(d)
}

// Decode parses checkpoint JSON and verifies its checksum; a mismatch is
// ErrCorrupt.
func Decode(b []byte) ([]PodDevicesEntry, map[string][]string, error) {
	var d data
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, nil, fmt.Errorf("decode %s: %w", FileName, err)
	}
	if checksum(d.Data) != d.Checksum {
		return nil, nil, ErrCorrupt
	}
	return d.Data.PodDeviceEntries, d.Data.RegisteredDevices, nil
}
