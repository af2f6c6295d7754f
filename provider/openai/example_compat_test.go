package openai_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/agentledger/ledger/provider/openai"
)

// An openai-go client pointed at Ollama, recorded as provider "ollama".
// Ollama's native errors are {"error":"..."}, which the SDK alone cannot
// read: it returns a JSON error and the status is lost. The upstream's
// ClientOptions give the SDK the body in OpenAI's shape, and its
// classifier applies Ollama's rules: a crashed runner (500) is retried, a
// model that is not pulled (404) is not.
func ExampleCompatible() {
	ollama := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, `{"error":"llama runner process has terminated: exit status 2"}`)
	}))
	defer ollama.Close()

	up, err := openai.Compatible("ollama", openai.WithBaseURL(ollama.URL+"/v1")) // default: http://localhost:11434/v1
	if err != nil {
		panic(err)
	}
	client := sdk.NewClient(append([]option.RequestOption{option.WithAPIKey("ollama")}, up.ClientOptions()...)...)
	_, err = client.Chat.Completions.New(context.Background(), sdk.ChatCompletionNewParams{
		Model:    "llama3.2",
		Messages: []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage("hello")},
	})
	c, _ := up.Classifier().Classify(err, time.Now())
	fmt.Println(up.Name(), c.Status, c.Kind, c.Retryable)
	// In an agent: ledger.Call{Provider: up.Name(), ...}; the middleware
	// classifies it without WithClassifiers.
	// Output: ollama 500 server true
}
