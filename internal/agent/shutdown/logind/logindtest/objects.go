package logindtest

import (
	"fmt"
	"math"

	"github.com/godbus/dbus/v5"

	"knode/internal/agent/shutdown/logind"
)

const (
	propertiesInterface     = "org.freedesktop.DBus.Properties"
	introspectableInterface = "org.freedesktop.DBus.Introspectable"
)

func invalidArgs(format string, args ...any) *dbus.Error {
	return dbus.NewError("org.freedesktop.DBus.Error.InvalidArgs", []any{fmt.Sprintf(format, args...)})
}

// objects lays out the two objects the fake serves.
func (f *Fake) objects() handler {
	return handler{
		logind.Path: object{
			logind.Interface: {
				"Inhibit": {in: "ssss", fn: f.inhibit},
			},
			propertiesInterface:     f.properties(logind.Interface),
			introspectableInterface: introspectable(loginXML),
		},
		logind.SystemdPath: object{
			logind.SystemdInterface: {
				"KillUnit": {in: "ssi", fn: f.killUnit},
			},
			propertiesInterface:     f.properties(logind.SystemdInterface),
			introspectableInterface: introspectable(systemdXML),
		},
	}
}

// propertyValues returns the properties of iface; only logind's manager has
// any.
func (f *Fake) propertyValues(iface string) (map[string]dbus.Variant, bool) {
	switch iface {
	case logind.Interface:
		f.mu.Lock()
		defer f.mu.Unlock()
		usec := uint64(f.delay.Microseconds())
		if f.delay == math.MaxInt64 {
			usec = math.MaxUint64 // logind's "infinity"
		}
		return map[string]dbus.Variant{
			"InhibitDelayMaxUSec":  dbus.MakeVariant(usec),
			"PreparingForShutdown": dbus.MakeVariant(f.preparing),
		}, true
	case logind.SystemdInterface:
		return map[string]dbus.Variant{}, true
	}
	return nil, false
}

func (f *Fake) properties(own string) map[string]method {
	lookup := func(iface string) (map[string]dbus.Variant, error) {
		if iface != own {
			return nil, dbus.NewError("org.freedesktop.DBus.Error.UnknownInterface", []any{fmt.Sprintf("Unknown interface %s.", iface)})
		}
		props, _ := f.propertyValues(iface)
		return props, nil
	}
	return map[string]method{
		"Get": {in: "ss", fn: func(c *call) ([]any, func(), error) {
			props, err := lookup(c.args[0].(string))
			if err != nil {
				return nil, nil, err
			}
			name := c.args[1].(string)
			v, ok := props[name]
			if !ok {
				return nil, nil, dbus.NewError("org.freedesktop.DBus.Error.UnknownProperty", []any{fmt.Sprintf("Unknown property %s.", name)})
			}
			return []any{v}, nil, nil
		}},
		"GetAll": {in: "s", fn: func(c *call) ([]any, func(), error) {
			props, err := lookup(c.args[0].(string))
			if err != nil {
				return nil, nil, err
			}
			return []any{props}, nil, nil
		}},
		"Set": {in: "ssv", fn: func(c *call) ([]any, func(), error) {
			return nil, nil, dbus.NewError("org.freedesktop.DBus.Error.PropertyReadOnly", []any{fmt.Sprintf("Property %s is read-only.", c.args[1])})
		}},
	}
}

func introspectable(xml string) map[string]method {
	return map[string]method{
		"Introspect": {in: "", fn: func(*call) ([]any, func(), error) {
			return []any{xml}, nil, nil
		}},
	}
}

const introspectHeader = `<!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
`

const standardInterfaces = ` <interface name="org.freedesktop.DBus.Properties">
  <method name="Get"><arg name="interface_name" type="s" direction="in"/><arg name="property_name" type="s" direction="in"/><arg name="value" type="v" direction="out"/></method>
  <method name="GetAll"><arg name="interface_name" type="s" direction="in"/><arg name="props" type="a{sv}" direction="out"/></method>
  <method name="Set"><arg name="interface_name" type="s" direction="in"/><arg name="property_name" type="s" direction="in"/><arg name="value" type="v" direction="in"/></method>
 </interface>
 <interface name="org.freedesktop.DBus.Introspectable">
  <method name="Introspect"><arg name="xml_data" type="s" direction="out"/></method>
 </interface>
 <interface name="org.freedesktop.DBus.Peer">
  <method name="Ping"/>
  <method name="GetMachineId"><arg name="machine_uuid" type="s" direction="out"/></method>
 </interface>
`

const loginXML = introspectHeader + `<node>
 <interface name="org.freedesktop.login1.Manager">
  <property name="InhibitDelayMaxUSec" type="t" access="read"/>
  <property name="PreparingForShutdown" type="b" access="read"/>
  <method name="Inhibit"><arg name="what" type="s" direction="in"/><arg name="who" type="s" direction="in"/><arg name="why" type="s" direction="in"/><arg name="mode" type="s" direction="in"/><arg name="pipe_fd" type="h" direction="out"/></method>
  <signal name="PrepareForShutdown"><arg name="start" type="b"/></signal>
 </interface>
` + standardInterfaces + `</node>
`

const systemdXML = introspectHeader + `<node>
 <interface name="org.freedesktop.systemd1.Manager">
  <method name="KillUnit"><arg name="name" type="s" direction="in"/><arg name="whom" type="s" direction="in"/><arg name="signal" type="i" direction="in"/></method>
 </interface>
` + standardInterfaces + `</node>
`
