/** Frames a pod sends past its sockets' address checks, for the spoofing tests (python3 in the pod's namespace). */

/** `count` raw Ethernet frames on net1 (AF_PACKET): IPv4/UDP from (srcMac, srcIp) to (dstMac, dstIp); prints how many sends the kernel refused (ENOBUFS: an egress hook dropped the frame). */
export const RAW_PY = `import socket,struct,sys
src_mac,src_ip,dst_mac,dst_ip,port,n=sys.argv[1:7]
def csum(b):
  s=sum(struct.unpack('!%dH'%(len(b)//2),b));s=(s>>16)+(s&0xffff);s+=s>>16;return ~s&0xffff
data=b'spoof';udp=struct.pack('!HHHH',40000,int(port),8+len(data),0)+data
ip=struct.pack('!BBHHHBBH4s4s',0x45,0,20+len(udp),1,0,64,17,0,socket.inet_aton(src_ip),socket.inet_aton(dst_ip))
ip=ip[:10]+struct.pack('!H',csum(ip))+ip[12:]
eth=bytes.fromhex(dst_mac.replace(':',''))+bytes.fromhex(src_mac.replace(':',''))+b'\\x08\\x00'
s=socket.socket(socket.AF_PACKET,socket.SOCK_RAW);s.bind(('net1',0))
refused=0
for _ in range(int(n)):
  try: s.send(eth+ip+udp)
  except OSError: refused+=1
print(refused)
`;
