"""Recurrent models in the style of the common tutorials: a sentiment-style classifier (Embedding with padding_idx,
pack_padded_sequence of unsorted lengths, a 2-layer bidirectional LSTM, the last layer's two final states
concatenated, Linear) and a character-level GRU language model trained with truncated backpropagation through time
(the hidden state carried from batch to batch and detached), plus an LSTMCell decoder unrolled by hand. Adam,
clip_grad_norm_, cross-entropy; synthetic token data. Dropout is 0 so that both libraries compute the same thing.
--init/--out/--double are the conformance suite's knobs."""
import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

VOCAB = 12


class Classifier(nn.Module):
    def __init__(self, vocab_size, embed_dim, hidden_dim, n_classes):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=0)
        self.lstm = nn.LSTM(embed_dim, hidden_dim, num_layers=2, bidirectional=True, batch_first=True)
        self.fc = nn.Linear(hidden_dim * 2, n_classes)

    def forward(self, text, lengths):
        embedded = self.embedding(text)
        packed = pack_padded_sequence(embedded, lengths.cpu(), batch_first=True, enforce_sorted=False)
        packed_output, (hidden, cell) = self.lstm(packed)
        output, _ = pad_packed_sequence(packed_output, batch_first=True)  # as tutorials do, though unused
        hidden = torch.cat((hidden[-2, :, :], hidden[-1, :, :]), dim=1)
        return self.fc(hidden)


class CharLM(nn.Module):
    def __init__(self, vocab_size, hidden_dim):
        super().__init__()
        self.encoder = nn.Embedding(vocab_size, hidden_dim)
        self.rnn = nn.GRU(hidden_dim, hidden_dim, num_layers=2)
        self.decoder = nn.Linear(hidden_dim, vocab_size)

    def forward(self, x, hidden):
        output, hidden = self.rnn(self.encoder(x), hidden)
        return self.decoder(output).view(-1, self.decoder.out_features), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return weight.new_zeros(self.rnn.num_layers, bsz, self.rnn.hidden_size)


class CellDecoder(nn.Module):
    """A decoder unrolled step by step with an LSTMCell, feeding its own previous output back."""

    def __init__(self, hidden_dim, steps):
        super().__init__()
        self.cell = nn.LSTMCell(VOCAB, hidden_dim)
        self.out = nn.Linear(hidden_dim, VOCAB)
        self.steps = steps

    def forward(self, h0):
        h, c = h0, torch.zeros_like(h0)
        y = torch.zeros(h0.size(0), VOCAB, dtype=h0.dtype, device=h0.device)
        logits = []
        for _ in range(self.steps):
            h, c = self.cell(y, (h, c))
            step = self.out(h)
            logits.append(step)
            y = F.softmax(step, dim=1)
        return torch.stack(logits, dim=1)


class Models(nn.Module):
    def __init__(self):
        super().__init__()
        self.classifier = Classifier(VOCAB, 8, 10, 3)
        self.lm = CharLM(VOCAB, 12)
        self.decoder = CellDecoder(12, 4)


def main():
    parser = argparse.ArgumentParser(description="recurrent models (synthetic data)")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--init", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--double", action="store_true")
    opt = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    rng = np.random.default_rng(0)
    model = Models().to(device)
    try:
        with np.load(opt.init) as z:
            model.load_state_dict({k: torch.from_numpy(z[k]) for k in z.files})
    except FileNotFoundError:
        np.savez(opt.init, **{k: v.detach().cpu().numpy() for k, v in model.state_dict().items()})
    if opt.double:
        model.double()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

    lengths = torch.tensor([7, 3, 5, 2, 6, 4])
    text = torch.from_numpy(rng.integers(1, VOCAB, (6, 7)))
    for i, n in enumerate(lengths.tolist()):
        text[i, n:] = 0  # padding_idx
    labels = torch.from_numpy(rng.integers(0, 3, 6))
    corpus = torch.from_numpy(rng.integers(0, VOCAB, (6 * opt.steps + 1, 4)))  # (time, batch) as the LM example
    bptt = 6
    hidden = model.lm.init_hidden(4)
    losses, first = [], {}
    for step in range(opt.steps):
        model.train()
        optimizer.zero_grad()
        cls_loss = F.cross_entropy(model.classifier(text.to(device), lengths.to(device)), labels.to(device))
        i = step * bptt
        data, target = corpus[i:i + bptt].to(device), corpus[i + 1:i + 1 + bptt].reshape(-1).to(device)
        hidden = hidden.detach()  # truncated backpropagation through time
        output, hidden = model.lm(data, hidden)
        lm_loss = nn.CrossEntropyLoss()(output, target)
        dec = model.decoder(hidden[-1])
        dec_loss = F.cross_entropy(dec.reshape(-1, VOCAB), target[:dec.shape[0] * dec.shape[1]])
        loss = cls_loss + lm_loss + 0.5 * dec_loss
        loss.backward()
        if not losses:  # for the test's float64 diagnosis: step 1's loss and gradients, before any step
            first = {"step0/loss": np.array(loss.item())}
            first.update({f"grad/{k}": p.grad.detach().cpu().double().numpy() for k, p in model.named_parameters()})
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        optimizer.step()
        losses.append(loss.item())
        print(f"step {step}: loss {loss.item():.4f} (classifier {cls_loss.item():.4f}, lm {lm_loss.item():.4f})")

    model.eval()
    with torch.no_grad():
        logits = model.classifier(text.to(device), lengths.to(device))
        accuracy = (logits.argmax(1) == labels.to(device)).float().mean().item()
    result = {"losses": np.array(losses), "eval_logits": logits.detach().cpu().double().numpy(),
              "accuracy": np.array(accuracy), **first}
    result.update({f"state/{k}": v.detach().cpu().double().numpy() for k, v in model.state_dict().items()})
    np.savez(opt.out, **result)


if __name__ == "__main__":
    main()
