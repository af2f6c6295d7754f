package openai

import (
	"encoding/json"
	"fmt"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

// EstimateChatParams estimates the input of a chat completion request
// made with the SDK, as EstimateInput does of its body.
func EstimateChatParams(params sdk.ChatCompletionNewParams) (Estimate, error) {
	return estimateParams(EndpointChat, params)
}

// EstimateResponseParams estimates the input of a Responses request made
// with the SDK, as EstimateInput does of its body.
func EstimateResponseParams(params responses.ResponseNewParams) (Estimate, error) {
	return estimateParams(EndpointResponses, params)
}

func estimateParams(endpoint string, params any) (Estimate, error) {
	body, err := json.Marshal(params)
	if err != nil {
		return Estimate{}, fmt.Errorf("%w: the %s params do not encode: %v", ErrNotEstimable, endpoint, err)
	}
	return EstimateInput(endpoint, "", body)
}
