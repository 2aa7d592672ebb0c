package checkpoint

import (
	"reflect"
	"testing"
)

// FuzzDecode: Decode never panics, and what it accepts encodes to a file it
// decodes the same way (the checksum covers what was read).
func FuzzDecode(f *testing.F) {
	good, err := Encode([]PodDevicesEntry{{PodUID: "p1", ContainerName: "c", ResourceName: "example.com/dev",
		DeviceIDs: DevicesPerNUMA{0: {"d0", "d1"}}, AllocResp: []byte{1, 2}}}, map[string][]string{"example.com/dev": {"d0", "d1", "d2"}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"Data":{"PodDeviceEntries":null,"RegisteredDevices":null},"Checksum":0}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, registered, err := Decode(b)
		if err != nil {
			return
		}
		again, err := Encode(entries, registered)
		if err != nil {
			t.Fatalf("Encode of a decoded checkpoint: %v", err)
		}
		entries2, registered2, err := Decode(again)
		if err != nil {
			t.Fatalf("Decode of a re-encoded checkpoint: %v", err)
		}
		if !reflect.DeepEqual(entries, entries2) || !reflect.DeepEqual(registered, registered2) {
			t.Fatalf("round trip changed the checkpoint:\n%+v %v\n%+v %v", entries, registered, entries2, registered2)
		}
	})
}
