// Package exec is a cloud provider that asks a user-supplied command,
// once per question, about the machine behind a node. It lets knode's
// cloud controllers work without any cloud: wrap ipmitool, a hypervisor's
// CLI, a cloud CLI or an inventory file in a small script.
//
// Enable it with
//
//	knode server --cloud-provider=exec --cloud-config=/etc/knode/cloud.yaml
//
// # The cloud-config file
//
// YAML (or JSON); unknown keys are an error.
//
//	command: /usr/local/bin/knode-ipmi   # required
//	args: ["--inventory", "/etc/knode/bmc.csv"]   # optional
//	timeout: 10s                          # optional, per call; default 10s
//	env:                                  # optional, added to the environment
//	  IPMI_PASSWORD_FILE: /etc/knode/ipmi.pass
//
// A command without a slash is looked up in PATH when the provider starts;
// a relative path with a slash is taken relative to the directory of the
// cloud-config file. It must exist and be executable when the provider
// starts.
//
// # Calls
//
// For each question knode runs
//
//	<command> <args...> <question> <node-name>
//
// where question is one of
//
//	instance-exists    does the machine still exist?
//	instance-shutdown  is it (existing but) powered off?
//	instance-metadata  what is it? (used once, to initialize a node that
//	                   registered with the node.cloudprovider.kubernetes.io/uninitialized taint)
//
// The command gets:
//   - on stdin, the Node object as JSON, as the API server has it;
//   - knode's own environment, the env entries of the cloud-config, and
//     KNODE_QUESTION (the question), KNODE_NODE_NAME (the node's name) and
//     KNODE_PROVIDER_ID (the node's spec.providerID, possibly empty);
//   - the current directory of knode.
//
// # Answers
//
// Exit status 0 means the command answered: stdout must hold exactly one
// JSON object (at most 1 MiB), and unknown keys are an error:
//
//	instance-exists    {"exists": true}
//	instance-shutdown  {"shutdown": false}
//	instance-metadata  {"providerID": "ipmi://rack1/node-7",
//	                    "instanceType": "r640",
//	                    "zone": "rack1", "region": "dc-west",
//	                    "addresses": [{"type": "InternalIP", "address": "10.0.0.7"},
//	                                  {"type": "Hostname", "address": "node-7"}],
//	                    "additionalLabels": {"example.com/bmc": "10.1.0.7"}}
//
// "exists" and "shutdown" are required in their answers. In a metadata
// answer every key is optional; "providerID" is needed unless the node
// already has one, and each address type must be one of Hostname,
// InternalIP, ExternalIP, InternalDNS or ExternalDNS.
//
// Exit status 3 means "this command cannot answer this question" (upstream
// "not implemented"): for instance-shutdown knode then takes the machine as
// not shut down, so a command that only knows existence can exit 3 for the
// other questions.
//
// Any other exit status, a signal, unparsable output or a timeout is an
// error; knode logs it, naming the command, the question and the node,
// with the end of stderr (up to 4 KiB), and does nothing about the node in
// that pass. Stderr is otherwise ignored, so commands may log there.
//
// # Timeouts
//
// Each call is bounded by the timeout of the cloud-config, counted on the
// provider's clock, and by the caller's context. When either ends, the
// command's whole process group receives SIGKILL. (The command runs in a
// process group of its own, so its children go too; a child that leaves
// the group and keeps stdout open is cut off shortly after.) Calls are
// made one at a time per controller pass, so a slow command slows the
// pass: keep answers fast.
//
// # Example
//
//	#!/bin/sh
//	# knode-ipmi <question> <node>: answers from the BMC's power state.
//	bmc=$(awk -F, -v n="$2" '$1 == n {print $2}' /etc/knode/bmc.csv)
//	case "$1" in
//	instance-exists)
//	    [ -n "$bmc" ] && echo '{"exists": true}' || echo '{"exists": false}' ;;
//	instance-shutdown)
//	    state=$(ipmitool -H "$bmc" -f "$IPMI_PASSWORD_FILE" power status) || exit 1
//	    case "$state" in
//	    *off*) echo '{"shutdown": true}' ;;
//	    *) echo '{"shutdown": false}' ;;
//	    esac ;;
//	*) exit 3 ;;
//	esac
package exec
