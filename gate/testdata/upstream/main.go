// Command upstream is a small MCP server, built with the Go SDK, that the
// gate's end-to-end tests put behind `airlock gate`. Its tools record every
// run in the file named by UPSTREAM_LOG, one line per run, so a test counts
// executions. It serves over stdio.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type noteArgs struct {
	Note string `json:"note" jsonschema:"the text to append"`
}

type echoArgs struct {
	Text string `json:"text"`
}

// recordToken appends the approval token the gate handed a call, if any,
// to UPSTREAM_LOG.tokens: "tool token", one line per run.
func recordToken(req *mcp.CallToolRequest) error {
	token, _ := req.Params.Meta["io.airlock/approval-token"].(string)
	f, err := os.OpenFile(os.Getenv("UPSTREAM_LOG")+".tokens", os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err = f.WriteString(req.Params.Name + " " + token + "\n"); err != nil {
		return err
	}
	return recordRevision(req)
}

// recordRevision appends the MCP revision the call came at and the
// client's title as the upstream heard them to UPSTREAM_LOG.revisions:
// "tool revision title", one line per run.
func recordRevision(req *mcp.CallToolRequest) error {
	var revision, title string
	if ip := req.Session.InitializeParams(); ip != nil {
		revision = ip.ProtocolVersion
		if ip.ClientInfo != nil {
			title = ip.ClientInfo.Title
		}
	}
	f, err := os.OpenFile(os.Getenv("UPSTREAM_LOG")+".revisions", os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteString(req.Params.Name + " " + revision + " " + title + "\n")
	return err
}

// record appends a line to UPSTREAM_LOG and syncs it.
func record(line string) error {
	f, err := os.OpenFile(os.Getenv("UPSTREAM_LOG"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.WriteString(line + "\n"); err != nil {
		return err
	}
	return f.Sync()
}

func main() {
	log.SetOutput(os.Stderr)
	s := mcp.NewServer(&mcp.Implementation{Name: "upstream", Title: "Test upstream", Version: "1.0.0"}, &mcp.ServerOptions{
		Instructions: "A test server.",
		CompletionHandler: func(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			var vals []string
			for _, v := range []string{"alice", "bob", "bella"} {
				if strings.HasPrefix(v, req.Params.Argument.Value) {
					vals = append(vals, v)
				}
			}
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: vals, Total: len(vals)}}, nil
		},
	})
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo text back.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
			if err := recordToken(req); err != nil {
				return nil, nil, err
			}
			if err := record("echo " + in.Text); err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "write_note", Description: "Append a note to the log (not read-only)."},
		func(ctx context.Context, req *mcp.CallToolRequest, in noteArgs) (*mcp.CallToolResult, any, error) {
			if tok := req.Params.GetProgressToken(); tok != nil {
				for i := 1; i <= 2; i++ {
					req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 2, Message: "writing"})
				}
			}
			if err := recordToken(req); err != nil {
				return nil, nil, err
			}
			if err := record("write_note " + in.Note); err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "wrote " + in.Note}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Always fails.", Annotations: &mcp.ToolAnnotations{DestructiveHint: new(true)}},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			record("fail")
			return nil, nil, fmt.Errorf("boom")
		})
	mcp.AddTool(s, &mcp.Tool{Name: "getenv", Description: "Read an environment variable of the server.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in struct {
			Name string `json:"name"`
		}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: os.Getenv(in.Name)}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "drop_table", Description: "Drop a table.", Annotations: &mcp.ToolAnnotations{DestructiveHint: new(true)}},
		func(_ context.Context, _ *mcp.CallToolRequest, in struct {
			Table string `json:"table"`
		}) (*mcp.CallToolResult, any, error) {
			if err := record("drop_table " + in.Table); err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "dropped " + in.Table}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "enable_extra", Description: "Add the tool extra (the tool list changes)."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			mcp.AddTool(s, &mcp.Tool{Name: "extra", Description: "Added at run time.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
				func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "extra"}}}, nil, nil
				})
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "enabled"}}}, nil, nil
		})
	s.AddResource(&mcp.Resource{URI: "note://readme", Name: "readme", MIMEType: "text/plain"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "hello from upstream"}}}, nil
		})
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "note://notes/{id}", Name: "note"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "note " + strings.TrimPrefix(req.Params.URI, "note://notes/")}}}, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "greet", Arguments: []*mcp.PromptArgument{{Name: "name", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "Hello, " + req.Params.Arguments["name"]}}}}, nil
		})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
