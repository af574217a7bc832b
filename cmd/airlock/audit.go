package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"iter"
	"os"
	"strings"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/auditlog"
	"github.com/airlockhq/airlock/client"
)

// The verifiable audit log (docs/audit.md), for auditors and admins.

// auditPage is how many entries `audit verify` asks the server for at once:
// the most GET /v1/audit/entries serves.
const auditPage = 10_000

// maxCheckpointBytes bounds a checkpoint file: a signed note is a few
// hundred bytes.
const maxCheckpointBytes = 64 << 10

// auditVerdict is `audit verify --json`'s answer.
type auditVerdict struct {
	Verified bool   `json:"verified"`
	Origin   string `json:"origin,omitempty"`
	Size     int64  `json:"tree_size"`
	Root     string `json:"root_hash,omitempty"`
	// PreviousSize is the size of the --previous checkpoint it extends.
	PreviousSize *int64 `json:"previous_tree_size,omitempty"`
	// PurgedRequests is how many requests' payloads retention purged
	// (their request.purged leaves): their leaves verify by the digests
	// they hold, and the bytes are gone from the server.
	PurgedRequests int64 `json:"purged_requests"`
	// PasskeyDecisions is how many decisions and votes signed with a
	// passkey verified: each signs its leaf's request, status and
	// arguments, with the credential's key. PasskeyKeysUnknown is how
	// many more could not be checked, the server no longer having their
	// public key.
	PasskeyDecisions   int64 `json:"passkey_decisions"`
	PasskeyKeysUnknown int64 `json:"passkey_keys_unknown"`
	// Index and Reason say where and why the log does not match.
	Index  *int64 `json:"index,omitempty"`
	Reason string `json:"reason,omitempty"`
	Error  string `json:"error,omitempty"`
}

func runAuditVerify(ctx context.Context, a *App, args []string) error {
	s, _ := findSubcommand("audit", "verify")
	r := &remote{out: a.Stdout, tty: isTerminal(a.Stdout)}
	fs := flag.NewFlagSet("audit verify", flag.ContinueOnError)
	fs.StringVar(&r.url, "url", defaultURL, "the Airlock server")
	fs.StringVar(&r.token, "token", "", "an auditor's or admin's token; prefer the environment variable, since other users can read command lines")
	fs.BoolVar(&r.json, "json", false, "print the verdict as JSON")
	entriesFile := fs.String("entries", "", "verify these entries (JSON lines, as GET /v1/audit/entries and the jsonl export write them; - for stdin) instead of the server's")
	checkpointFile := fs.String("checkpoint", "", "a signed checkpoint file to verify against (default: the server's latest)")
	keyFlag := fs.String("key", "", "the log's note verifier key, or a file holding it; pin it (default: the server's, which proves only that the server signed)")
	previousFile := fs.String("previous", "", "a checkpoint kept earlier: check the log only grew since")
	keepFile := fs.String("keep", "", "after the log verifies, write its checkpoint to this file, the --previous of the next run")
	a.setSubcommandUsage(fs, "audit verify", s.synopsis, s.summary, `
Against a server (--url, with a token) it reads the latest checkpoint and every entry.
Offline (--entries with --checkpoint and --key) it reads files only; given a token too,
it asks the server for the proofs that name the first entry that does not match (the
proofs are checked against the signed checkpoint, so the server need not be trusted).

Exit codes: 0 the log verifies, 1 it does not (the first index that does not match, and
why: order, malformed, leaf_hash, root, extra, missing, signature, consistency,
passkey) or an
error, 2 usage.
`)
	if err := a.parseFlags(fs, args); err != nil {
		return err
	}
	offline := *entriesFile != ""
	if offline && (*checkpointFile == "" || *keyFlag == "") {
		return usageErrorf("audit verify --entries needs --checkpoint and --key: a file of entries proves nothing without the signed checkpoint and the key to check it")
	}
	if !offline && r.token == "" {
		return usageErrorf("no token: set AIRLOCK_TOKEN (an auditor's or admin's), or verify files offline with --entries, --checkpoint and --key")
	}
	var c *client.Client
	if r.token != "" {
		var err error
		if c, err = r.client(); err != nil {
			return err
		}
	}

	key := *keyFlag
	if key != "" {
		var err error
		if key, err = readKey(key); err != nil {
			return err
		}
	} else {
		var err error
		if key, err = c.AuditKey(ctx); err != nil {
			return apiError(err)
		}
		if !r.json {
			fmt.Fprintf(a.Stderr, "airlock: using the server's key %s; pin it with --key\n", key)
		}
	}
	var note []byte
	if *checkpointFile != "" {
		var err error
		if note, err = readSmallFile("--checkpoint", *checkpointFile); err != nil {
			return err
		}
	} else {
		var err error
		if note, err = c.AuditCheckpoint(ctx); err != nil {
			return apiError(err)
		}
	}
	cp, err := auditlog.OpenCheckpoint(note, key)
	if err != nil {
		return auditVerdictOut(a, r, auditlog.Checkpoint{}, nil, auditCounts{}, &auditlog.VerifyError{Index: -1, Reason: auditlog.ReasonSignature, Err: fmt.Errorf("the checkpoint: %w", err)})
	}
	var previous *auditlog.Checkpoint
	if *previousFile != "" {
		data, err := readSmallFile("--previous", *previousFile)
		if err != nil {
			return err
		}
		p, err := auditlog.OpenCheckpoint(data, key)
		if err != nil {
			return auditVerdictOut(a, r, cp, nil, auditCounts{}, &auditlog.VerifyError{Index: -1, Reason: auditlog.ReasonSignature, Err: fmt.Errorf("the previous checkpoint: %w", err)})
		}
		previous = &p
	}

	var entries iter.Seq2[auditlog.Entry, error]
	if offline {
		var in io.Reader = a.Stdin
		if *entriesFile != "-" {
			f, err := os.Open(*entriesFile)
			if err != nil {
				return usageErrorf("--entries: %v", err)
			}
			defer f.Close()
			in = f
		}
		entries = auditlog.NewEntryReader(in).All()
	} else {
		entries = serverEntries(ctx, c, cp.Size)
	}
	// Count the requests retention purged as the entries stream by: their
	// leaves verify by the digests they hold, and the verdict says so.
	// Count the passkey records too: VerifyEntries checks each.
	var n auditCounts
	entries = countEntries(entries, &n)
	var prover auditlog.Prover
	if c != nil {
		prover = func(from, to int64) (auditlog.ConsistencyProof, error) {
			return c.AuditConsistencyProof(ctx, from, to)
		}
	}
	if previous != nil {
		err = auditlog.VerifyEntriesSince(*previous, entries, cp, prover)
	} else {
		err = auditlog.VerifyEntries(entries, cp, prover)
	}
	if err == nil && *keepFile != "" {
		if werr := os.WriteFile(*keepFile, note, 0o644); werr != nil {
			return fmt.Errorf("the log verifies, but --keep: %w", werr)
		}
	}
	return auditVerdictOut(a, r, cp, previous, n, err)
}

// purgedType is how a request.purged leaf spells its type: leaves are
// canonical, so a leaf of that type holds exactly these bytes.
var purgedType = []byte(`"type":"` + string(airlock.EventRequestPurged) + `"`)

// auditCounts are what the verdict counts of the entries.
type auditCounts struct {
	purged      int64 // request.purged leaves
	passkeys    int64 // passkey records with a public key
	keysUnknown int64 // passkey records without one
}

// countEntries passes entries through, counting in n the request.purged
// leaves and the passkey records among them.
func countEntries(entries iter.Seq2[auditlog.Entry, error], n *auditCounts) iter.Seq2[auditlog.Entry, error] {
	return func(yield func(auditlog.Entry, error) bool) {
		for e, err := range entries {
			if err == nil && bytes.Contains(e.Leaf, purgedType) {
				n.purged++
			}
			if err == nil && e.Passkey != nil {
				if len(e.Passkey.PublicKey) == 0 {
					n.keysUnknown++
				} else {
					n.passkeys++
				}
			}
			if !yield(e, err) {
				return
			}
		}
	}
}

// serverEntries reads the first size entries from the server, a page at a
// time: memory holds one page. A page that comes back empty ends them, and
// VerifyEntries reports the rest missing.
func serverEntries(ctx context.Context, c *client.Client, size int64) iter.Seq2[auditlog.Entry, error] {
	return func(yield func(auditlog.Entry, error) bool) {
		for next := int64(0); next < size; {
			page, err := c.AuditEntries(ctx, next, int(min(auditPage, size-next)))
			if err != nil {
				yield(auditlog.Entry{}, apiError(err))
				return
			}
			if len(page) == 0 {
				return
			}
			for _, e := range page {
				if !yield(e, nil) {
					return
				}
			}
			next += int64(len(page))
		}
	}
}

// auditVerdictOut prints the verdict of err and returns what makes the
// exit code: nil when the log verifies, else an error already printed.
func auditVerdictOut(a *App, r *remote, cp auditlog.Checkpoint, previous *auditlog.Checkpoint, n auditCounts, err error) error {
	var ve *auditlog.VerifyError
	if err != nil && !errors.As(err, &ve) {
		return err // not a verdict: the server or a file could not be read
	}
	v := auditVerdict{Verified: err == nil, Origin: cp.Origin, Size: cp.Size, PurgedRequests: n.purged}
	if err == nil {
		v.PasskeyDecisions, v.PasskeyKeysUnknown = n.passkeys, n.keysUnknown
	}
	if cp.Origin != "" {
		v.Root = cp.Root.String()
	}
	if previous != nil {
		v.PreviousSize = &previous.Size
	}
	if ve != nil {
		v.Reason, v.Error = string(ve.Reason), ve.Err.Error()
		if ve.Index >= 0 {
			v.Index = &ve.Index
		}
	}
	if r.json {
		if perr := r.printJSON(v); perr != nil {
			return perr
		}
	} else if err == nil {
		fmt.Fprintf(r.out, "Verified: the %d entries of %s are the tree its checkpoint signs (root %s)", cp.Size, cp.Origin, v.Root)
		if previous != nil {
			fmt.Fprintf(r.out, ", and the checkpoint of %d entries kept earlier is of its first %d", previous.Size, previous.Size)
		}
		fmt.Fprintln(r.out, ".")
		if n.purged > 0 {
			fmt.Fprintf(r.out, "%d requests' arguments, reasoning and context were purged by retention: their leaves verify by the digests they hold.\n", n.purged)
		}
		if n.passkeys > 0 {
			fmt.Fprintf(r.out, "%d decisions and votes signed with a passkey: each signature verifies, over its leaf's request, status and arguments.\n", n.passkeys)
		}
		if n.keysUnknown > 0 {
			fmt.Fprintf(r.out, "%d more signed with a passkey could not be checked: the server no longer has their passkey's public key.\n", n.keysUnknown)
		}
	}
	if err == nil {
		return nil
	}
	return &exitError{exitFailure, fmt.Errorf("not verified: %w", err)}
}

// readKey returns the note verifier key flagValue names: the file of that
// name when there is one, else the key itself ("origin+hash+keydata", which
// note.NewVerifier then checks).
func readKey(flagValue string) (string, error) {
	if _, err := os.Stat(flagValue); err != nil {
		return flagValue, nil
	}
	data, err := readSmallFile("--key", flagValue)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(data)), nil
}

// readSmallFile reads a checkpoint or key file, refusing one larger than
// any of them is.
func readSmallFile(flagName, path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, usageErrorf("%s: %v", flagName, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxCheckpointBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flagName, err)
	}
	if len(data) > maxCheckpointBytes {
		return nil, usageErrorf("%s: %s is larger than %d bytes, more than a checkpoint or a key", flagName, path, maxCheckpointBytes)
	}
	return data, nil
}
