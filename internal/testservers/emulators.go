package testservers

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable/bttest"
	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"
	_ "gocloud.dev/blob/s3blob" // s3://

	"github.com/ssfkit/ssfkit/internal/suite"
)

// Bigtable is the Bigtable emulator from the client library, in-process; Addr returns its
// HOST:PORT.
var Bigtable = &Server{Name: "bttest (in-process Bigtable emulator)", Start: func() (string, func(), error) {
	srv, err := bttest.NewServer("127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	return srv.Addr, srv.Close, nil
}}

// Moto serves the AWS APIs (DynamoDB, SQS, ...) on one port; Addr returns its endpoint URL.
// Clients need credentials and a region, any values: see MotoEnv.
var Moto = &Server{Name: "moto (AWS emulator)", Start: startMoto}

// MotoEnv are the environment settings an AWS SDK client needs to talk to moto.
var MotoEnv = map[string]string{
	"AWS_ACCESS_KEY_ID":     "testing",
	"AWS_SECRET_ACCESS_KEY": "testing",
	"AWS_REGION":            "us-east-1",
}

//go:embed moto_launcher.py
var motoLauncher []byte

// startMoto runs moto_server through moto_launcher.py (SQS attributes in AWS's compact JSON),
// with the Python interpreter moto_server itself runs on.
func startMoto() (string, func(), error) {
	bin, err := Tool("moto_server", "run `make tools` (pip install 'moto[server]==5.2.1')")
	if err != nil {
		return "", nil, err
	}
	launcher, err := os.CreateTemp("", "moto-launcher-*.py")
	if err != nil {
		return "", nil, err
	}
	defer os.Remove(launcher.Name()) // Python has read it once the server answers
	if _, err := launcher.Write(motoLauncher); err != nil {
		return "", nil, err
	}
	launcher.Close()
	return startOnFreePorts(1, func(ports []int) (string, func(), error) {
		p, err := StartProcess(pythonOf(bin), []string{launcher.Name(), "-H", "127.0.0.1", "-p", fmt.Sprint(ports[0])})
		if err != nil {
			return "", nil, err
		}
		endpoint := "http://" + HostPort(ports[0])
		if err := p.WaitReady(30*time.Second, httpReady(endpoint+"/moto-api/")); err != nil {
			return "", nil, err
		}
		// Lambda functions are stored, not run: moto runs them only in Docker, and the setting
		// must come before any function is created.
		resp, err := http.Post(endpoint+"/moto-api/config", "application/json", strings.NewReader(`{"lambda":{"use_docker":false}}`))
		if err != nil {
			p.Stop()
			return "", nil, fmt.Errorf("configuring moto: %w", err)
		}
		resp.Body.Close()
		return endpoint, p.Stop, nil
	})
}

// pythonOf returns the interpreter of a Python console script: the one its #! line names when
// that is a Python (a virtualenv's), else python3 from PATH (pyenv's shims are shell scripts).
func pythonOf(script string) string {
	b, err := os.ReadFile(script)
	if err == nil && bytes.HasPrefix(b, []byte("#!")) {
		line, _, _ := bytes.Cut(b[2:], []byte("\n"))
		if interp := strings.TrimSpace(string(line)); strings.Contains(filepath.Base(interp), "python") && !strings.Contains(interp, " ") {
			return interp
		}
	}
	return "python3"
}

// AzuriteEndpoints are the service endpoints of one Azurite process. Azurite accepts the
// well-known development account (AzuriteAccount, AzuriteKey).
type AzuriteEndpoints struct {
	Table string // e.g. http://127.0.0.1:PORT/devstoreaccount1
	Queue string
	Blob  string
}

// The development storage account Azurite accepts.
const (
	AzuriteAccount = "devstoreaccount1"
	AzuriteKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// Azurite serves Azure Tables, Queues and Blobs in memory; Addr returns "TABLE_URL QUEUE_URL
// BLOB_URL", which AzuriteAddrs splits.
var Azurite = &Server{Name: "Azurite (Azure Storage emulator)", Start: startAzurite}

// AzuriteAddrs starts Azurite if needed and returns its endpoints.
func AzuriteAddrs(t suite.T) AzuriteEndpoints {
	t.Helper()
	var e AzuriteEndpoints
	fmt.Sscan(Azurite.Addr(t), &e.Table, &e.Queue, &e.Blob)
	return e
}

func startAzurite() (string, func(), error) {
	bin, err := Tool("azurite", "run `make tools` (npm install azurite@3.37.0)")
	if err != nil {
		return "", nil, err
	}
	return startOnFreePorts(3, func(ports []int) (string, func(), error) {
		p, err := StartProcess(bin, []string{
			"--silent", "--inMemoryPersistence", "--skipApiVersionCheck", "--disableProductStyleUrl",
			"--blobHost", "127.0.0.1", "--blobPort", fmt.Sprint(ports[0]),
			"--queueHost", "127.0.0.1", "--queuePort", fmt.Sprint(ports[1]),
			"--tableHost", "127.0.0.1", "--tablePort", fmt.Sprint(ports[2]),
		})
		if err != nil {
			return "", nil, err
		}
		for _, port := range ports {
			if err := p.WaitReady(60*time.Second, DialReady(HostPort(port))); err != nil {
				return "", nil, err
			}
		}
		account := func(port int) string { return "http://" + HostPort(port) + "/" + AzuriteAccount }
		return account(ports[2]) + " " + account(ports[1]) + " " + account(ports[0]), p.Stop, nil
	})
}

// httpReady succeeds once url answers an HTTP GET with any status below 500.
func httpReady(url string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode >= 500 {
			return fmt.Errorf("%s answered %s", url, resp.Status)
		}
		return nil
	}
}

// MotoResidue lists what moto still holds that is named for an environment (NAME-... or
// alias/ssfkit-NAME): DynamoDB tables, SQS queues, Lambda functions and event source mappings,
// IAM roles, log groups, schedules, KMS aliases (a key cannot be deleted at once; its alias
// can). It asks each service's list API (moto's data dump fails once a function exists: it
// reaches for Docker).
func MotoResidue(moto, environment string) ([]string, error) {
	ctx := context.Background()
	prefix := environment + "-"
	var left []string
	add := func(kind, name string) {
		if strings.HasPrefix(name, prefix) || strings.HasPrefix(name, "/aws/lambda/"+prefix) || name == "alias/ssfkit-"+environment {
			left = append(left, kind+" "+name)
		}
	}
	lists := []struct {
		kind, service, target, method, path, body string
		names                                     *regexp.Regexp
	}{
		{"DynamoDB table", "dynamodb", "DynamoDB_20120810.ListTables", "POST", "/", "{}", regexp.MustCompile(`"([^"]+)"`)},
		{"SQS queue", "sqs", "AmazonSQS.ListQueues", "POST", "/", "{}", regexp.MustCompile(`/([^/"]+)"`)},
		{"Lambda function", "lambda", "", "GET", "/2015-03-31/functions/", "", regexp.MustCompile(`"FunctionName":\s*"([^"]+)"`)},
		{"event source mapping of", "lambda", "", "GET", "/2015-03-31/event-source-mappings/", "", regexp.MustCompile(`"FunctionArn":\s*"[^"]*:function:([^"]+)"`)},
		{"IAM role", "iam", "", "POST", "/", "Action=ListRoles&Version=2010-05-08", regexp.MustCompile(`<RoleName>([^<]+)</RoleName>`)},
		{"log group", "logs", "Logs_20140328.DescribeLogGroups", "POST", "/", "{}", regexp.MustCompile(`"logGroupName":\s*"([^"]+)"`)},
		{"schedule", "scheduler", "", "GET", "/schedules", "", regexp.MustCompile(`"Name":\s*"([^"]+)"`)},
		{"KMS alias", "kms", "TrentService.ListAliases", "POST", "/", "{}", regexp.MustCompile(`"AliasName":\s*"([^"]+)"`)},
		{"S3 bucket", "s3", "", "GET", "/", "", regexp.MustCompile(`<Name>([^<]+)</Name>`)},
	}
	signer := v4.NewSigner()
	creds := aws.Credentials{AccessKeyID: MotoEnv["AWS_ACCESS_KEY_ID"], SecretAccessKey: MotoEnv["AWS_SECRET_ACCESS_KEY"]}
	for _, l := range lists {
		req, err := http.NewRequestWithContext(ctx, l.method, moto+l.path, strings.NewReader(l.body))
		if err != nil {
			return nil, err
		}
		switch {
		case l.target != "":
			req.Header.Set("X-Amz-Target", l.target)
			req.Header.Set("Content-Type", "application/x-amz-json-1.0")
			if l.service == "logs" || l.service == "kms" {
				req.Header.Set("Content-Type", "application/x-amz-json-1.1")
			}
		case l.body != "":
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		sum := sha256.Sum256([]byte(l.body))
		if err := signer.SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), l.service, MotoEnv["AWS_REGION"], time.Now()); err != nil {
			return nil, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("moto: listing %ss: %d %v %.300s", l.kind, resp.StatusCode, err, b)
		}
		for _, m := range l.names.FindAllSubmatch(b, -1) {
			add(l.kind, string(m[1]))
		}
	}
	sort.Strings(left)
	return left, nil
}

// MotoS3 points the AWS SDK's default chain at moto alone for the rest of the test (no files,
// no instance metadata, no profile) and returns the s3:// URL (gocloud.dev/blob's) of bucket on
// moto, and create, which makes the bucket.
func MotoS3(t *testing.T, bucket string) (bucketURL string, create func()) {
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_CONFIG_FILE": dir + "/config", "AWS_SHARED_CREDENTIALS_FILE": dir + "/credentials", "AWS_EC2_METADATA_DISABLED": "true",
	} {
		t.Setenv(k, v)
	}
	for k, v := range MotoEnv {
		t.Setenv(k, v)
	}
	bucketURL = "s3://" + bucket + "?region=us-east-1&use_path_style=true&endpoint=" + url.QueryEscape(Moto.Addr(t))
	return bucketURL, func() {
		ctx := context.Background()
		raw, err := blob.OpenBucket(ctx, bucketURL)
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		var c *s3.Client
		if !raw.As(&c) {
			t.Fatal("s3blob bucket without an S3 client")
		}
		if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
			t.Fatal(err)
		}
	}
}
