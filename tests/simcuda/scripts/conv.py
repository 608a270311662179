"""A small conv net (Conv2d, BatchNorm, pooling) trained 5 steps with SGD
and momentum, cuDNN off: PyTorch's own convolution kernels."""
import torch, torch.nn as nn
torch.backends.cudnn.enabled = False
m = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                  nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                  nn.Flatten(), nn.Linear(64, 10)).cuda()
opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
for _ in range(5):
    x, y = torch.randn(32, 3, 64, 64, device="cuda"), torch.randint(0, 10, (32,), device="cuda")
    loss = nn.functional.cross_entropy(m(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
