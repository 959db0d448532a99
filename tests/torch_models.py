import torch, torch.nn as nn, torch.nn.functional as F, math

class RMSNorm(nn.Module):
    def __init__(s, d, eps=1e-6):
        super().__init__(); s.w = nn.Parameter(torch.ones(d)); s.eps = eps
    def forward(s, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + s.eps) * s.w

def rope(x, cos, sin):
    d = x.shape[-1] // 2
    x1, x2 = x[..., :d], x[..., d:]
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin

class LlamaBlock(nn.Module):
    def __init__(s, d=32, h=4, kvh=2, f=64):
        super().__init__()
        s.h, s.kvh, s.hd = h, kvh, d // h
        s.n1, s.n2 = RMSNorm(d), nn.RMSNorm(d, eps=1e-6)
        s.q = nn.Linear(d, d, bias=False); s.k = nn.Linear(d, kvh * s.hd, bias=False); s.v = nn.Linear(d, kvh * s.hd, bias=False)
        s.o = nn.Linear(d, d, bias=False)
        s.g = nn.Linear(d, f, bias=False); s.u = nn.Linear(d, f, bias=False); s.dn = nn.Linear(f, d, bias=False)
    def forward(s, x, cos, sin):
        B, T, D = x.shape
        h = s.n1(x)
        q = s.q(h).view(B, T, s.h, s.hd).transpose(1, 2)
        k = s.k(h).view(B, T, s.kvh, s.hd).transpose(1, 2)
        v = s.v(h).view(B, T, s.kvh, s.hd).transpose(1, 2)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + s.o(a.transpose(1, 2).contiguous().view(B, T, D))
        return x + s.dn(F.silu(s.g(s.n2(x))) * s.u(s.n2(x)))

class GPTBlock(nn.Module):
    def __init__(s, d=32, h=4):
        super().__init__(); s.h = h
        s.ln1, s.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        s.attn = nn.Linear(d, 3 * d); s.proj = nn.Linear(d, d)
        s.fc = nn.Linear(d, 4 * d); s.fc2 = nn.Linear(4 * d, d); s.drop = nn.Dropout(0.1)
    def forward(s, x):
        B, T, C = x.shape
        q, k, v = s.attn(s.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, s.h, C // s.h).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
        att = att.masked_fill(~mask, float('-inf'))
        y = F.softmax(att, dim=-1) @ v
        x = x + s.drop(s.proj(y.transpose(1, 2).contiguous().view(B, T, C)))
        return x + s.drop(s.fc2(F.gelu(s.fc(s.ln2(x)), approximate='tanh')))

class LM(nn.Module):
    def __init__(s, V=64, d=32, T=16):
        super().__init__()
        s.tok = nn.Embedding(V, d); s.pos = nn.Embedding(T, d); s.b = GPTBlock(d); s.ln = nn.LayerNorm(d); s.head = nn.Linear(d, V, bias=False)
    def forward(s, idx, tgt):
        T = idx.shape[1]
        x = s.tok(idx) + s.pos(torch.arange(T))
        logits = s.head(s.ln(s.b(x)))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), tgt.view(-1))
