//go:build linux

package deploy

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/testkit"
)

// maxImageBytes bounds the image: its layers as shipped (compressed) and
// the root file system they unpack to.
const maxImageBytes = 40 << 20

// ociDescriptor, ociManifest and ociConfig are the parts of an OCI image
// layout (image-spec v1) the test reads.
type ociDescriptor struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
}

type ociManifest struct {
	Config ociDescriptor   `json:"config"`
	Layers []ociDescriptor `json:"layers"`
}

type ociConfig struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Config       struct {
		User       string
		Env        []string
		Entrypoint []string
		Cmd        []string
		WorkingDir string
		Volumes    map[string]struct{}
	} `json:"config"`
}

// TestContainerImage builds the image from ../Containerfile with buildah,
// exports it as an OCI archive, and runs it as a container runtime would
// without one (podman run is refused on these machines): it unpacks the
// layers, then runs the image's entrypoint and command with its
// environment, as its user, on an empty /data, waits for /readyz, runs a
// whole approval lifecycle over HTTP, and runs the image's health check.
// The image must be at most 40 MB and its user not root.
func TestContainerImage(t *testing.T) {
	t.Parallel()
	buildah, err := exec.LookPath("buildah")
	if err != nil {
		testkit.Unavailable(t, "buildah is not installed (apt-get install buildah): the container image is not built")
	}
	work := t.TempDir()
	start := time.Now()

	// The build context, as scripts/release.sh lays it out in the
	// repository: the Containerfile, what it copies, and the binary.
	ctxDir := filepath.Join(work, "context")
	arch := runtime.GOARCH
	bin := filepath.Join(ctxDir, "dist", "linux_"+arch, "airlock")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", releaseLdflags(t), "-o", bin, "../cmd/airlock")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	built := time.Now()
	for _, f := range []string{"Containerfile", "LICENSE", "deploy/container/passwd", "deploy/container/group", "deploy/container/data/README"} {
		copyFile(t, filepath.Join("..", f), filepath.Join(ctxDir, f))
	}
	copyFile(t, "/etc/ssl/certs/ca-certificates.crt", filepath.Join(ctxDir, "dist", "ca-certificates.crt"))

	// buildah with storage of the test's own, removed with it.
	tag := "localhost/airlock-image-test:" + filepath.Base(work)
	storage := []string{"--storage-driver", "vfs", "--root", filepath.Join(work, "storage"), "--runroot", filepath.Join(work, "run")}
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(buildah, append(slices.Clone(storage), args...)...)
		cmd.Dir = ctxDir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("buildah %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("bud", "--quiet", "--isolation", "chroot", "--format", "docker", "--build-arg", "TARGETARCH="+arch, "-f", "Containerfile", "-t", tag, ".")
	// The OCI image format has no health check; the Docker format, which
	// docker and podman run, keeps the Containerfile's.
	var inspect struct {
		Docker struct {
			Config struct {
				Healthcheck *struct{ Test []string }
			} `json:"config"`
		}
	}
	if err := json.Unmarshal([]byte(run("inspect", "--type", "image", tag)), &inspect); err != nil {
		t.Fatalf("buildah inspect: %v", err)
	}
	hc := inspect.Docker.Config.Healthcheck
	if hc == nil || !slices.Equal(hc.Test, []string{"CMD", "/usr/local/bin/airlock", "healthcheck"}) {
		t.Fatalf("the image's health check is %+v, want CMD /usr/local/bin/airlock healthcheck", hc)
	}
	archive := filepath.Join(work, "airlock.oci.tar")
	run("push", "--quiet", tag, "oci-archive:"+archive+":airlock:test")
	t.Cleanup(func() {
		// vfs layers are plain folders; make them removable by TempDir's cleanup.
		exec.Command(buildah, append(slices.Clone(storage), "rmi", "--all", "--force")...).Run()
	})
	imaged := time.Now()

	cfg, layers, compressed := readOCIArchive(t, archive, filepath.Join(work, "oci"))
	if cfg.OS != "linux" || cfg.Architecture != arch {
		t.Errorf("image for %s/%s, want linux/%s", cfg.OS, cfg.Architecture, arch)
	}
	if compressed > maxImageBytes {
		t.Errorf("image layers are %d bytes compressed, more than %d", compressed, maxImageBytes)
	}
	user := cfg.Config.User
	if uid, _, _ := strings.Cut(user, ":"); uid != fmt.Sprint(imageUID) {
		t.Fatalf("the image's user is %q, want %d (numeric, not root)", user, imageUID)
	}
	if _, ok := cfg.Config.Volumes["/data"]; !ok {
		t.Errorf("the image declares volumes %v, want /data", cfg.Config.Volumes)
	}

	rootfs := filepath.Join(work, "rootfs")
	unpacked, dataOwner := unpackLayers(t, layers, rootfs)
	if unpacked > maxImageBytes {
		t.Errorf("the image's root file system is %d bytes, more than %d", unpacked, maxImageBytes)
	}
	if dataOwner != imageUID {
		t.Errorf("/data belongs to uid %d, want %d, who must write the database there", dataOwner, imageUID)
	}
	if passwd := readFile(t, filepath.Join(rootfs, "etc/passwd")); !strings.Contains(passwd, fmt.Sprintf(":%d:%d:", imageUID, imageUID)) {
		t.Errorf("/etc/passwd names no user %d:\n%s", imageUID, passwd)
	}

	// /data is a folder of the test's; every absolute path of the image
	// (the entrypoint, the configuration's /data/…) moves under the
	// unpacked root or that folder. The listening port moves to a free
	// one; the host stays the image's.
	data := filepath.Join(work, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	relocate := func(s string) string {
		if s == "/data" || strings.HasPrefix(s, "/data/") {
			return data + strings.TrimPrefix(s, "/data")
		}
		if strings.HasPrefix(s, "/") {
			return filepath.Join(rootfs, s)
		}
		return s
	}
	env := []string{}
	var addr string
	for _, kv := range cfg.Config.Env {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case k == "PATH":
		case k == "AIRLOCK_ADDR":
			host, port, err := net.SplitHostPort(v)
			if err != nil || port != listenPort {
				t.Errorf("the image's AIRLOCK_ADDR is %q, want port %s", v, listenPort)
			}
			addr = net.JoinHostPort(host, "0")
			kv = k + "=" + addr
		case strings.HasPrefix(k, "AIRLOCK_"):
			kv = k + "=" + relocate(v)
		}
		env = append(env, kv)
	}
	for _, want := range []string{"AIRLOCK_DB", "AIRLOCK_ADDR", "AIRLOCK_ADMIN_TOKEN_FILE"} {
		if !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, want+"=") }) {
			t.Fatalf("the image sets no %s: %v", want, cfg.Config.Env)
		}
	}
	argv := append(slices.Clone(cfg.Config.Entrypoint), cfg.Config.Cmd...)
	if len(argv) == 0 || argv[0] != "/usr/local/bin/airlock" || !slices.Equal(argv[1:], []string{"serve"}) {
		t.Fatalf("the image runs %q, want /usr/local/bin/airlock serve", argv)
	}
	entry := relocate(argv[0])

	// As the image's user, when the test may switch to it: the binary
	// and the data folder must be reachable by that user alone.
	var cred *syscall.SysProcAttr
	if os.Geteuid() == 0 {
		cred = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: imageUID, Gid: imageUID}}
		if err := os.Chown(data, imageUID, imageUID); err != nil {
			t.Fatal(err)
		}
		for dir := filepath.Dir(entry); ; dir = filepath.Dir(dir) {
			if err := os.Chmod(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if dir == filepath.Dir(work) || dir == "/" {
				break
			}
		}
	}
	cmd := exec.Command(entry, argv[1:]...)
	cmd.Dir, cmd.Env, cmd.SysProcAttr = data, append(env, "HOME="+data), cred
	srv := serve(t, cmd)
	started := time.Now()
	if srv.Addr == "" {
		t.Fatalf("the server printed no address:\n%s", srv.Out)
	}
	_, port, _ := net.SplitHostPort(srv.Addr)
	base := "http://127.0.0.1:" + port
	waitReady(t, base)

	// The first start wrote the admin token where the image said, for
	// the image's user only.
	tokenFile := relocate("/data/admin-token")
	st, err := os.Stat(tokenFile)
	if err != nil {
		t.Fatalf("no admin token file: %v\n%s", err, srv.Out)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("admin token file mode %v, want 0600", st.Mode().Perm())
	}
	admin := strings.TrimSpace(readFile(t, tokenFile))
	lifecycle(t, base, admin)

	// The health check, as the image runs it: the image's environment,
	// whose AIRLOCK_ADDR names the server's address.
	check := exec.Command(relocate(hc.Test[1]), hc.Test[2:]...)
	check.Env = append(slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, "AIRLOCK_ADDR=") }),
		"AIRLOCK_ADDR="+net.JoinHostPort(strings.Split(addr, ":")[0], port))
	check.SysProcAttr = cred
	if out, err := check.CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "ready: ") {
		t.Errorf("the image's health check: %v\n%s", err, out)
	}
	version, err := exec.Command(entry, "version").Output()
	if err != nil || !strings.Contains(string(version), "-SNAPSHOT-") {
		t.Errorf("the image's airlock version: %v\n%s", err, version)
	}
	srv.Stop(10 * time.Second)
	t.Logf("image: %d bytes compressed, %d unpacked; go build %v, buildah bud+push %v, serving to lifecycle done %v",
		compressed, unpacked, built.Sub(start).Round(time.Millisecond), imaged.Sub(built).Round(time.Millisecond), time.Since(started).Round(time.Millisecond))
}

// serve starts cmd, an airlock serve, and waits until it says where it
// listens. It is killed at the end of the test if still running.
func serve(t *testing.T, cmd *exec.Cmd) *testkit.Process {
	t.Helper()
	p := &testkit.Process{Cmd: cmd, Out: testkit.NewOutput(), Exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.Out, p.Out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd.Path, err)
	}
	go func() {
		cmd.Wait()
		close(p.Exited)
	}()
	t.Cleanup(p.Kill)
	m := p.Out.WaitFor(t, testkit.ListeningRE, p.Exited)
	p.URL, p.Addr = m[1], m[2]
	return p
}

// waitReady polls /readyz until it answers 200: the image's start is
// what the test measures, and readiness is what a platform waits for.
func waitReady(t *testing.T, base string) {
	t.Helper()
	testkit.Eventually(t, time.Minute, base+"/readyz to answer 200", func() bool {
		r, err := testkit.Call(t.Context(), http.DefaultClient, "GET", base+"/readyz", "", "")
		return err == nil && r.Status == 200
	})
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// readOCIArchive unpacks an oci-archive (a tar of an OCI image layout)
// into dir and returns the image's configuration, its layers' files and
// their size as shipped.
func readOCIArchive(t *testing.T, archive, dir string) (ociConfig, []string, int64) {
	t.Helper()
	untar(t, archive, dir, false)
	var index struct{ Manifests []ociDescriptor }
	readJSON(t, filepath.Join(dir, "index.json"), &index)
	if len(index.Manifests) != 1 || index.Manifests[0].MediaType != "application/vnd.oci.image.manifest.v1+json" {
		t.Fatalf("index.json lists %+v, want one OCI image manifest", index.Manifests)
	}
	blob := func(d ociDescriptor) string {
		algo, hex, _ := strings.Cut(d.Digest, ":")
		return filepath.Join(dir, "blobs", algo, hex)
	}
	var m ociManifest
	readJSON(t, blob(index.Manifests[0]), &m)
	var cfg ociConfig
	readJSON(t, blob(m.Config), &cfg)
	var files []string
	var size int64
	for _, l := range m.Layers {
		if !strings.HasPrefix(l.MediaType, "application/vnd.oci.image.layer.v1.tar") {
			t.Fatalf("layer of media type %s", l.MediaType)
		}
		files = append(files, blob(l))
		size += l.Size
	}
	return cfg, files, size
}

func readJSON(t *testing.T, file string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(readFile(t, file)), v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// unpackLayers applies the layers in order to rootfs, as a runtime does
// (whiteouts aside: a scratch image's one layer has none), and returns
// the bytes of the files and the owner of /data.
func unpackLayers(t *testing.T, layers []string, rootfs string) (int64, int) {
	t.Helper()
	var size int64
	owner := -1
	for _, l := range layers {
		s, o := untar(t, l, rootfs, true)
		size += s
		if o >= 0 {
			owner = o
		}
	}
	return size, owner
}

// untar extracts a tar file (gzip-compressed when gz) into dir and
// returns the bytes of its regular files and the owner of data/ in it
// (-1 when absent). Names that would leave dir are refused.
func untar(t *testing.T, file, dir string, gz bool) (int64, int) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r io.Reader = f
	if gz {
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		r = zr
	}
	tr := tar.NewReader(r)
	var size int64
	owner := -1
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		name := path.Clean("/" + h.Name)
		if name == "/data" {
			owner = h.Uid
		}
		target := filepath.Join(dir, filepath.FromSlash(name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				t.Fatal(err)
			}
			out, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode).Perm()|0o400)
			if err != nil {
				t.Fatal(err)
			}
			n, err := io.Copy(out, tr)
			out.Close()
			if err != nil {
				t.Fatal(err)
			}
			size += n
		default:
			t.Fatalf("%s: %s is of tar type %c; a scratch image holds files and folders only", file, h.Name, h.Typeflag)
		}
	}
	return size, owner
}
