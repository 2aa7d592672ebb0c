package logindtest

import (
	"github.com/godbus/dbus/v5"
)

// The fake answers method calls through its own dbus.Handler instead of
// conn.Export, for one reason: Inhibit must close its copy of the lock's file
// descriptor after the reply carrying it has been written, and Export sends
// the reply after the method returns, with no hook. Here a method's reply is
// sent by the method itself (see call.reply), then its cleanup runs.

// methodFunc serves one call. It returns the reply body, or a *dbus.Error.
// after, if not nil, runs once the reply (or error) has been sent.
type methodFunc func(c *call) (body []any, after func(), err error)

type method struct {
	in string // signature of the arguments
	fn methodFunc
}

// object maps interface name → method name → method.
type object map[string]map[string]method

// handler serves a fixed set of objects; it is shared by every connection
// the fake opens.
type handler map[dbus.ObjectPath]object

func (h handler) LookupObject(path dbus.ObjectPath) (dbus.ServerObject, bool) {
	o, ok := h[path]
	return o, ok
}

func (o object) LookupInterface(name string) (dbus.Interface, bool) {
	if name == "" {
		// A call without an interface names a method on any of them.
		merged := iface{}
		for _, ms := range o {
			for n, m := range ms {
				merged[n] = m
			}
		}
		return merged, true
	}
	ms, ok := o[name]
	return iface(ms), ok
}

type iface map[string]method

func (i iface) LookupMethod(name string) (dbus.Method, bool) {
	m, ok := i[name]
	return m, ok
}

// call is one incoming method call.
type call struct {
	conn   *dbus.Conn
	sender string
	msg    *dbus.Message
	args   []any
	reply  bool // the caller wants a reply
}

// DecodeArguments checks the signature and hands the whole call to Call as
// its only argument. It also marks the message as wanting no reply, so that
// godbus does not send one after Call: Call sends it.
func (m method) DecodeArguments(conn *dbus.Conn, sender string, msg *dbus.Message, args []any) ([]any, error) {
	sig, _ := msg.Headers[dbus.FieldSignature].Value().(dbus.Signature)
	if sig.String() != m.in {
		return nil, invalidArgs("got arguments %q, want %q", sig.String(), m.in)
	}
	c := &call{conn: conn, sender: sender, msg: msg, args: args, reply: msg.Flags&dbus.FlagNoReplyExpected == 0}
	msg.Flags |= dbus.FlagNoReplyExpected
	return []any{c}, nil
}

func (m method) Call(args ...any) ([]any, error) {
	c := args[0].(*call)
	body, after, err := m.fn(c)
	if after != nil {
		// On error godbus sends the error after we return; an after hook
		// only ever releases resources the reply would have carried, so
		// running it first is harmless.
		defer after()
	}
	if err != nil {
		return nil, err
	}
	if c.reply {
		c.sendReply(body)
	}
	return nil, nil
}

func (m method) NumArguments() int     { return 1 }
func (m method) NumReturns() int       { return 0 }
func (m method) ArgumentValue(int) any { return nil }
func (m method) ReturnValue(int) any   { return nil }

// sendReply writes the reply to c; it returns once the message is written to
// the bus socket (or the connection is found closed).
func (c *call) sendReply(body []any) {
	reply := &dbus.Message{
		Type:    dbus.TypeMethodReply,
		Headers: map[dbus.HeaderField]dbus.Variant{dbus.FieldReplySerial: dbus.MakeVariant(c.msg.Serial())},
		Body:    body,
	}
	if c.sender != "" {
		reply.Headers[dbus.FieldDestination] = dbus.MakeVariant(c.sender)
	}
	if len(body) > 0 {
		reply.Headers[dbus.FieldSignature] = dbus.MakeVariant(dbus.SignatureOf(body...))
	}
	// For anything but a method call, Send writes synchronously.
	c.conn.Send(reply, nil)
}
