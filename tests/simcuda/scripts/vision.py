"""A torchvision model: resnet18 trained 2 steps with SGD on 16 images of
64x64, cuDNN off."""
import torch, torchvision
torch.backends.cudnn.enabled = False
m = torchvision.models.resnet18(num_classes=100).cuda()
opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
for _ in range(2):
    x, y = torch.randn(16, 3, 64, 64, device="cuda"), torch.randint(0, 100, (16,), device="cuda")
    loss = torch.nn.functional.cross_entropy(m(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
